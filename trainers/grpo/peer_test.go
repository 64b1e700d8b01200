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

// TestPeerParity computes each policy loss under each aggregation, and
// the k3 KL, on a random batch with rlpipe and with verl's own functions
// (testdata/peer_losses.py: core_algos.compute_policy_loss_vanilla,
// compute_policy_loss_gspo, compute_policy_loss_cispo, kl_penalty and
// agg_loss, under autograd), and wants the loss and every token's
// gradient with respect to logπ equal within 1e-6. The cases skip, saying
// why, when verl does not import.
func TestPeerParity(t *testing.T) {
	py := pyvenv.Peer(t)
	seqs := peerSeqs()
	type peerCase struct {
		Name    string  `json:"name"`
		Fn      string  `json:"fn"`
		Agg     string  `json:"agg"`
		EpsLow  float64 `json:"eps_low"`
		EpsHigh float64 `json:"eps_high"`
		ClipC   float64 `json:"clip_c"`
	}
	var peerCases []peerCase
	type tc struct {
		name string
		o    grpo.LossOptions
		// kl: compare β·k3 alone (advantages 0, β 1) with verl's
		// kl_penalty low_var_kl.
		kl bool
		// differ: a control, verl's numbers are not these.
		differ bool
		peer   peerCase
	}
	var cases []tc
	for _, agg := range grpo.Aggregations {
		for _, l := range []struct {
			loss grpo.PolicyLoss
			fn   string
		}{
			{grpo.PPOClip, "compute_policy_loss_vanilla"},
			{grpo.GSPO, "compute_policy_loss_gspo"},
			{grpo.CISPO, "compute_policy_loss_cispo"},
		} {
			name := l.loss.Name() + " " + string(agg)
			// verl's vanilla loss always has a dual clip: 1e9 never binds.
			cases = append(cases, tc{name: name, o: grpo.LossOptions{Policy: l.loss, Aggregation: agg, EpsLow: 0.2, EpsHigh: 0.28},
				peer: peerCase{Name: name, Fn: l.fn, Agg: verlAgg[agg], EpsLow: 0.2, EpsHigh: 0.28, ClipC: 1e9}})
		}
		name := "ppo_clip dual_clip 1.2 " + string(agg)
		cases = append(cases, tc{name: name, o: grpo.LossOptions{Aggregation: agg, EpsLow: 0.1, EpsHigh: 0.1, DualClip: 1.2},
			peer: peerCase{Name: name, Fn: "compute_policy_loss_vanilla", Agg: verlAgg[agg], EpsLow: 0.1, EpsHigh: 0.1, ClipC: 1.2}})
		name = "k3 " + string(agg)
		cases = append(cases, tc{name: name, o: grpo.LossOptions{Aggregation: agg, Beta: 1}, kl: true,
			peer: peerCase{Name: name, Fn: "kl_low_var_kl", Agg: verlAgg[agg]}})
	}
	cases = append(cases,
		tc{name: "control: token mean is not verl's seq-mean-token-mean", o: grpo.LossOptions{EpsLow: 0.2, EpsHigh: 0.28}, differ: true,
			peer: peerCase{Name: "control agg", Fn: "compute_policy_loss_vanilla", Agg: "seq-mean-token-mean", EpsLow: 0.2, EpsHigh: 0.28, ClipC: 1e9}},
		tc{name: "control: ppo_clip is not verl's gspo", o: grpo.LossOptions{EpsLow: 0.2, EpsHigh: 0.28}, differ: true,
			peer: peerCase{Name: "control loss", Fn: "compute_policy_loss_gspo", Agg: "token-mean", EpsLow: 0.2, EpsHigh: 0.28}})
	for _, c := range cases {
		peerCases = append(peerCases, c.peer)
	}
	peer := runPeer(t, py, "peer_losses.py", seqs, peerCases)
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

// peerSeq is a sequence as the peer scripts read it: float64 lists, the
// trainable mask as 0/1, behaviour logprobs when it has them.
type peerSeq struct {
	Logprobs  []float64 `json:"logprobs"`
	Old       []float64 `json:"old"`
	Behaviour []float64 `json:"behaviour,omitempty"`
	Ref       []float64 `json:"ref"`
	Mask      []float64 `json:"mask"`
	Adv       float64   `json:"adv"`
}

// peerBatch is seqs as the peer scripts read them.
func peerBatch(seqs []grpo.Sequence) []peerSeq {
	out := make([]peerSeq, len(seqs))
	for i, s := range seqs {
		ps := peerSeq{Logprobs: s.Logprobs, Ref: s.RefLogprobs, Adv: s.Advantage}
		for j, o := range s.OldLogprobs {
			ps.Old = append(ps.Old, float64(o))
			if s.BehaviourLogprobs != nil {
				ps.Behaviour = append(ps.Behaviour, float64(s.BehaviourLogprobs[j]))
			}
			m := 1.0
			if s.Trainable != nil && !s.Trainable[j] {
				m = 0
			}
			ps.Mask = append(ps.Mask, m)
		}
		out[i] = ps
	}
	return out
}

// runPeer runs testdata/script under py on seqs and the cases (written as
// JSON {"seqs", "cases"}) and returns its answer by case name (with
// "verl_error" when verl does not import).
func runPeer(t *testing.T, py, script string, seqs []grpo.Sequence, cases any) map[string]json.RawMessage {
	t.Helper()
	batch := filepath.Join(t.TempDir(), "batch.json")
	b, err := json.Marshal(struct {
		Seqs  []peerSeq `json:"seqs"`
		Cases any       `json:"cases"`
	}{peerBatch(seqs), cases})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(batch, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := pyvenv.Run(t, "testdata/"+script, nil, py, filepath.Join("testdata", script), batch)
	var peer map[string]json.RawMessage
	if err := json.Unmarshal(out, &peer); err != nil {
		t.Fatalf("read %s's answer: %v\n%s", script, err, out)
	}
	if how, ok := peer["verl_import"]; ok {
		t.Logf("verl imported as: %s", how)
	}
	return peer
}

// verlAgg is each aggregation's name in verl's agg_loss.
var verlAgg = map[grpo.Aggregation]string{grpo.TokenMean: "token-mean", grpo.SequenceMean: "seq-mean-token-mean", grpo.SeqMeanTokenSumNorm: "seq-mean-token-sum-norm"}

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
