package grpo_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// peerSeqs is a random batch with a fixed seed: 24 sequences of 1 to 12
// tokens, log-ratios of sd 0.3 around a drift of sd 0.35 per sequence (so
// that both clips act, on tokens and on GSPO's sequences), advantages of
// both signs, one of them 0, a trainable mask with holes on every fourth
// sequence and one sequence with no trainable token.
func peerSeqs() []grpo.Sequence {
	rng := rand.New(rand.NewPCG(36, 3))
	seqs := make([]grpo.Sequence, 24)
	for i := range seqs {
		n := 1 + rng.IntN(12)
		s := grpo.Sequence{Advantage: rng.NormFloat64()}
		drift := rng.NormFloat64() * 0.35 // so that GSPO's sequence ratios clip too
		for j := 0; j < n; j++ {
			old := float32(-0.05 - rng.ExpFloat64())
			s.OldLogprobs = append(s.OldLogprobs, old)
			s.Logprobs = append(s.Logprobs, math.Min(float64(old)+drift+rng.NormFloat64()*0.3, -1e-3))
			s.RefLogprobs = append(s.RefLogprobs, float64(old)+rng.NormFloat64()*0.25)
		}
		if i%4 == 1 {
			s.Trainable = make([]bool, n)
			for j := range s.Trainable {
				s.Trainable[j] = rng.IntN(3) > 0
			}
		}
		seqs[i] = s
	}
	seqs[5].Advantage = 0
	// A sequence the policy has moved up 1 per token, with a positive
	// advantage: GSPO clips it high.
	seqs[3].Advantage = math.Abs(seqs[3].Advantage)
	for j := range seqs[3].OldLogprobs {
		seqs[3].OldLogprobs[j] -= 1
	}
	seqs[9].Trainable = make([]bool, len(seqs[9].Logprobs))
	return seqs
}

// peerLossCase is a case of peer_losses.py: verl's function, its
// loss_agg_mode and the clip bounds (clip_c its dual clip).
type peerLossCase struct {
	Name    string  `json:"name"`
	Fn      string  `json:"fn"`
	Agg     string  `json:"agg"`
	EpsLow  float64 `json:"eps_low"`
	EpsHigh float64 `json:"eps_high"`
	ClipC   float64 `json:"clip_c"`
}

// verlLosses are the policy losses with a verl function of the same
// arithmetic.
var verlLosses = []struct {
	loss grpo.PolicyLoss
	fn   string
}{
	{grpo.PPOClip, "compute_policy_loss_vanilla"},
	{grpo.GSPO, "compute_policy_loss_gspo"},
	{grpo.CISPO, "compute_policy_loss_cispo"},
}

// verlAgg is verl's loss_agg_mode of each aggregation.
var verlAgg = map[grpo.Aggregation]string{grpo.TokenMean: "token-mean", grpo.SequenceMean: "seq-mean-token-mean", grpo.SeqMeanTokenSumNorm: "seq-mean-token-sum-norm"}

// peerBatch is what a peer script reads: the sequences and the cases.
type peerBatch[S, C any] struct {
	Seqs  []S `json:"seqs"`
	Cases []C `json:"cases"`
}

// peerTokens are what every peer script reads of a sequence besides its
// current logprobs: the old and reference logprobs, the trainable mask
// (1 or 0 per token), the advantage (or PPO's per token), and the
// behaviour logprobs when the sequence has them.
type peerTokens struct {
	Old       []float64 `json:"old"`
	Behaviour []float64 `json:"behaviour,omitempty"`
	Ref       []float64 `json:"ref"`
	Mask      []float64 `json:"mask"`
	Adv       float64   `json:"adv"`
	TokenAdv  []float64 `json:"token_adv,omitempty"`
}

// lossSeq is a sequence as the loss scripts read it.
type lossSeq struct {
	Logprobs []float64 `json:"logprobs"`
	peerTokens
}

// lossBatch is seqs and cases as the loss scripts read them.
func lossBatch[C any](seqs []grpo.Sequence, cases []C) peerBatch[lossSeq, C] {
	b := peerBatch[lossSeq, C]{Cases: cases}
	for _, s := range seqs {
		b.Seqs = append(b.Seqs, lossSeq{s.Logprobs, tokensOf(s)})
	}
	return b
}

func tokensOf(s grpo.Sequence) peerTokens {
	p := peerTokens{Ref: s.RefLogprobs, Adv: s.Advantage, TokenAdv: s.Advantages}
	for j, o := range s.OldLogprobs {
		p.Old = append(p.Old, float64(o))
		if s.BehaviourLogprobs != nil {
			p.Behaviour = append(p.Behaviour, float64(s.BehaviourLogprobs[j]))
		}
		m := 1.0
		if s.Trainable != nil && !s.Trainable[j] {
			m = 0
		}
		p.Mask = append(p.Mask, m)
	}
	return p
}

// runPeer writes in as JSON to a file, runs testdata/script on it with
// py and returns the members of the JSON object it prints.
func runPeer(t *testing.T, py, script string, in any) map[string]json.RawMessage {
	t.Helper()
	batch := filepath.Join(t.TempDir(), "batch.json")
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(batch, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := pyvenv.Run(t, "testdata/"+script, nil, py, filepath.Join("testdata", script), batch)
	var peer map[string]json.RawMessage
	if err := json.Unmarshal(out, &peer); err != nil {
		t.Fatalf("read the output of %s: %v\n%s", script, err, out)
	}
	if how, ok := peer["verl_import"]; ok {
		t.Logf("verl imported as: %s", how)
	}
	return peer
}

// TestPeerParity computes each policy loss under each aggregation, and
// the k1, k2 and k3 KL, on a random batch with rlpipe and with verl's own functions
// (testdata/peer_losses.py: core_algos.compute_policy_loss_vanilla,
// compute_policy_loss_gspo, compute_policy_loss_cispo, kl_penalty and
// agg_loss, under autograd), and wants the loss and every token's
// gradient with respect to logπ equal within 1e-6. The cases skip, saying
// why, when verl does not import.
func TestPeerParity(t *testing.T) {
	py := pyvenv.Peer(t)
	seqs := peerSeqs()
	type peerCase = peerLossCase
	var peerCases []peerCase
	type tc struct {
		name string
		o    grpo.LossOptions
		// kl: compare β·k alone (advantages 0, β 1) with verl's
		// kl_penalty of the estimator's verl name.
		kl bool
		// differ: a control, verl's numbers are not these.
		differ bool
		peer   peerCase
	}
	var cases []tc
	for _, agg := range grpo.Aggregations {
		for _, l := range verlLosses {
			name := l.loss.Name() + " " + string(agg)
			// verl's vanilla loss always has a dual clip: 1e9 never binds.
			cases = append(cases, tc{name: name, o: grpo.LossOptions{Policy: l.loss, Aggregation: agg, EpsLow: 0.2, EpsHigh: 0.28},
				peer: peerCase{Name: name, Fn: l.fn, Agg: verlAgg[agg], EpsLow: 0.2, EpsHigh: 0.28, ClipC: 1e9}})
		}
		name := "ppo_clip dual_clip 1.2 " + string(agg)
		cases = append(cases, tc{name: name, o: grpo.LossOptions{Aggregation: agg, EpsLow: 0.1, EpsHigh: 0.1, DualClip: 1.2},
			peer: peerCase{Name: name, Fn: "compute_policy_loss_vanilla", Agg: verlAgg[agg], EpsLow: 0.1, EpsHigh: 0.1, ClipC: 1.2}})
		for _, k := range []struct {
			est  grpo.KLEstimator
			verl string
		}{{grpo.K1, "kl"}, {grpo.K2, "mse"}, {grpo.K3, "low_var_kl"}} {
			name = string(k.est) + " " + string(agg)
			cases = append(cases, tc{name: name, o: grpo.LossOptions{Aggregation: agg, Beta: 1, KL: k.est}, kl: true,
				peer: peerCase{Name: name, Fn: "kl_" + k.verl, Agg: verlAgg[agg]}})
		}
	}
	cases = append(cases,
		tc{name: "control: token mean is not verl's seq-mean-token-mean", o: grpo.LossOptions{EpsLow: 0.2, EpsHigh: 0.28}, differ: true,
			peer: peerCase{Name: "control agg", Fn: "compute_policy_loss_vanilla", Agg: "seq-mean-token-mean", EpsLow: 0.2, EpsHigh: 0.28, ClipC: 1e9}},
		tc{name: "control: ppo_clip is not verl's gspo", o: grpo.LossOptions{EpsLow: 0.2, EpsHigh: 0.28}, differ: true,
			peer: peerCase{Name: "control loss", Fn: "compute_policy_loss_gspo", Agg: "token-mean", EpsLow: 0.2, EpsHigh: 0.28}},
		tc{name: "control: k1 is not verl's low_var_kl", o: grpo.LossOptions{Beta: 1, KL: grpo.K1}, kl: true, differ: true,
			peer: peerCase{Name: "control kl", Fn: "kl_low_var_kl", Agg: "token-mean"}})
	for _, c := range cases {
		peerCases = append(peerCases, c.peer)
	}
	peer := runPeer(t, py, "peer_losses.py", lossBatch(seqs, peerCases))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var want lossGrad
			peerAnswer(t, peer, py, c.peer.Name, len(seqs), &want, &want)
			in := seqs
			if c.kl {
				in = make([]grpo.Sequence, len(seqs))
				for i, s := range seqs {
					s.Advantage = 0
					in[i] = s
				}
			}
			st, g, err := grpo.Loss(in, c.o)
			if err != nil {
				t.Fatal(err)
			}
			if c.differ {
				far := 0
				for i := range g {
					for j := range g[i] {
						if math.Abs(g[i][j]-want.Grad[i][j]) > 1e-3 {
							far++
						}
					}
				}
				if far == 0 {
					t.Errorf("verl's %s agrees with rlpipe's %+v everywhere: the comparison cannot tell them apart", c.peer.Fn, c.o)
				}
				return
			}
			want.check(t, st.Loss, g)
			if !c.kl && (st.ClipLow == 0 || st.ClipHigh == 0) {
				t.Errorf("clip fractions low %v high %v: the batch does not test both clips", st.ClipLow, st.ClipHigh)
			}
			if c.o.DualClip > 0 && *st.ClipDual == 0 {
				t.Error("no token met the dual clip: the batch does not test it")
			}
		})
	}
}

// valueSeqs is a random batch with a fixed seed: 20 sequences of 1 to 10
// tokens whose current values moved from the old ones by up to ±0.6 (so
// the clip at 0.2 binds on both sides), holes in every third mask and
// one sequence with no trainable token.
func valueSeqs() []grpo.ValueSequence {
	rng := rand.New(rand.NewPCG(36, 11))
	seqs := make([]grpo.ValueSequence, 20)
	for i := range seqs {
		n := 1 + rng.IntN(10)
		var s grpo.ValueSequence
		for range n {
			old := rng.NormFloat64() * 0.5
			s.OldValues = append(s.OldValues, old)
			s.Values = append(s.Values, old+(rng.Float64()-0.5)*1.2)
			s.Returns = append(s.Returns, rng.NormFloat64())
		}
		if i%3 == 1 {
			s.Trainable = make([]bool, n)
			for t := range s.Trainable {
				s.Trainable[t] = rng.IntN(3) > 0
			}
		}
		seqs[i] = s
	}
	seqs[4].Trainable = make([]bool, len(seqs[4].Values))
	return seqs
}

// TestValueLossPeerParity computes the clipped value loss under each
// aggregation with rlpipe and with verl's core_algos.compute_value_loss
// (testdata/peer_value.py, under autograd), and wants the loss, the clip
// fraction and every token's gradient equal within 1e-6. It skips, saying
// why, when verl does not import.
func TestValueLossPeerParity(t *testing.T) {
	py := pyvenv.Peer(t)
	seqs := valueSeqs()
	type peerSeq struct {
		V    []float64 `json:"v"`
		Old  []float64 `json:"old"`
		Ret  []float64 `json:"ret"`
		Mask []float64 `json:"mask"`
	}
	type peerCase struct {
		Name string  `json:"name"`
		Clip float64 `json:"clip"`
		Agg  string  `json:"agg"`
	}
	cases := []struct {
		peerCase
		agg grpo.Aggregation
	}{
		{peerCase{"token clip 0.2", 0.2, "token-mean"}, grpo.TokenMean},
		{peerCase{"sequence clip 0.2", 0.2, "seq-mean-token-mean"}, grpo.SequenceMean},
		{peerCase{"token sum norm clip 0.5", 0.5, "seq-mean-token-sum-norm"}, grpo.SeqMeanTokenSumNorm},
	}
	var in struct {
		Seqs  []peerSeq  `json:"seqs"`
		Cases []peerCase `json:"cases"`
	}
	for _, s := range seqs {
		p := peerSeq{V: s.Values, Old: s.OldValues, Ret: s.Returns}
		for t := range s.Values {
			m := 1.0
			if s.Trainable != nil && !s.Trainable[t] {
				m = 0
			}
			p.Mask = append(p.Mask, m)
		}
		in.Seqs = append(in.Seqs, p)
	}
	for _, c := range cases {
		in.Cases = append(in.Cases, c.peerCase)
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	batch := filepath.Join(t.TempDir(), "batch.json")
	if err := os.WriteFile(batch, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := pyvenv.Run(t, "testdata/peer_value.py", nil, py, filepath.Join("testdata", "peer_value.py"), batch)
	type result struct {
		Loss     float64     `json:"loss"`
		ClipFrac float64     `json:"clipfrac"`
		Grad     [][]float64 `json:"grad"`
	}
	var peer map[string]json.RawMessage
	if err := json.Unmarshal(out, &peer); err != nil {
		t.Fatalf("read verl's value loss: %v\n%s", err, out)
	}
	if why, ok := peer["verl_error"]; ok {
		t.Skipf("verl does not import under %s: %s", py, why)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			var want result
			if err := json.Unmarshal(peer[c.Name], &want); err != nil {
				t.Fatal(err)
			}
			got, err := grpo.ValueLoss(seqs, grpo.ValueLossOptions{ClipRange: c.Clip, Aggregation: c.agg})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got.Loss-want.Loss) > 1e-6 || math.Abs(got.ClipFrac-want.ClipFrac) > 1e-6 {
				t.Errorf("loss %v clip fraction %v, verl %v and %v", got.Loss, got.ClipFrac, want.Loss, want.ClipFrac)
			}
			if c.Clip == 0.2 && (got.ClipFrac == 0 || got.ClipFrac == 1) {
				t.Errorf("clip fraction %v: the batch does not exercise the clip", got.ClipFrac)
			}
			for i := range seqs {
				for tok := range seqs[i].Values {
					if math.Abs(got.Grad[i][tok]-want.Grad[i][tok]) > 1e-6 {
						t.Errorf("sequence %d token %d: gradient %v, verl %v", i, tok, got.Grad[i][tok], want.Grad[i][tok])
					}
				}
			}
		})
	}
}

// lossGrad is a peer's loss and its gradient with respect to each
// sequence's logprobs.
type lossGrad struct {
	Loss float64     `json:"loss"`
	Grad [][]float64 `json:"grad"`
}

// check wants rlpipe's loss and gradient equal to the peer's within 1e-6.
func (w lossGrad) check(t *testing.T, loss float64, g [][]float64) {
	t.Helper()
	if math.Abs(loss-w.Loss) > 1e-6 {
		t.Errorf("loss: rlpipe %.12g, verl %.12g", loss, w.Loss)
	}
	for i := range g {
		for j := range g[i] {
			if math.Abs(g[i][j]-w.Grad[i][j]) > 1e-6 {
				t.Errorf("∂loss/∂logπ of sequence %d token %d: rlpipe %.9g, verl %.9g", i, j, g[i][j], w.Grad[i][j])
			}
		}
	}
}

// peerAnswer reads the peer's answer to the case name into want, whose
// lossGrad part lg must hold a gradient for each of n sequences; it skips
// when verl does not import.
func peerAnswer(t *testing.T, peer map[string]json.RawMessage, py, name string, n int, want any, lg *lossGrad) {
	t.Helper()
	if why, ok := peer["verl_error"]; ok {
		t.Skipf("verl does not import under %s: %s", py, why)
	}
	if err := json.Unmarshal(peer[name], want); err != nil || len(lg.Grad) != n {
		t.Fatalf("verl's case %s: %v, %d sequences, want %d", name, err, len(lg.Grad), n)
	}
}
