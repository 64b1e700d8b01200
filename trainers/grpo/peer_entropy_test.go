package grpo_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// entropyVocab is the peer batch's vocabulary size.
const entropyVocab = 7

// logitSeqs is peerSeqs' shape (lengths, masks, advantages) with logits
// behind every token: logπ and H come from a random distribution over
// entropyVocab tokens and a sampled token, old and reference logprobs
// lie around logπ. logits[i][t] are token t's of sequence i.
func logitSeqs() (seqs []grpo.Sequence, logits [][][]float64, target [][]int) {
	rng := rand.New(rand.NewPCG(36, 17))
	seqs = peerSeqs()
	logits = make([][][]float64, len(seqs))
	target = make([][]int, len(seqs))
	for i := range seqs {
		s := &seqs[i]
		for t := range s.Logprobs {
			z := make([]float64, entropyVocab)
			for k := range z {
				z[k] = 1.5 * rng.NormFloat64()
			}
			tok := rng.IntN(entropyVocab)
			lp, h := logSoftmax(z)
			logits[i] = append(logits[i], z)
			target[i] = append(target[i], tok)
			s.Logprobs[t] = lp[tok]
			s.OldLogprobs[t] = float32(lp[tok] + 0.3*rng.NormFloat64())
			s.RefLogprobs[t] = lp[tok] + 0.25*rng.NormFloat64()
			s.Entropies = append(s.Entropies, h)
		}
	}
	return seqs, logits, target
}

// logSoftmax is log p of the logits z and the entropy −Σ p log p.
func logSoftmax(z []float64) ([]float64, float64) {
	mx := math.Inf(-1)
	for _, v := range z {
		mx = math.Max(mx, v)
	}
	var s float64
	for _, v := range z {
		s += math.Exp(v - mx)
	}
	lse := mx + math.Log(s)
	lp := make([]float64, len(z))
	var h float64
	for k, v := range z {
		lp[k] = v - lse
		h -= math.Exp(lp[k]) * lp[k]
	}
	return lp, h
}

// logitGrad takes a token's ∂loss/∂logπ (gl) and ∂loss/∂H (gh) to its
// logits: gl·(onehot − p) + gh·(−p_k·(log p_k + H)).
func logitGrad(z []float64, tok int, gl, gh float64) []float64 {
	lp, h := logSoftmax(z)
	g := make([]float64, len(z))
	for k := range z {
		p := math.Exp(lp[k])
		g[k] = -gl*p - gh*p*(lp[k]+h)
	}
	g[tok] += gl
	return g
}

// TestPeerEntropyParity computes the clipped surrogate plus a KL (k1, k2,
// k3) and an entropy bonus on a random batch with logits behind every
// token, with rlpipe (Gradient, taken to the logits) and with verl's own
// functions composed as verl's actor loss does
// (testdata/peer_entropy.py: compute_policy_loss_vanilla,
// entropy_from_logits, kl_penalty, agg_loss, under autograd), and wants
// the loss and every logit's gradient equal within 1e-6, under each
// aggregation; the entropies equal verl's and TRL's entropy_from_logits.
func TestPeerEntropyParity(t *testing.T) {
	py := pyvenv.Peer(t)
	seqs, logits, target := logitSeqs()
	type peerSeq struct {
		Logits [][]float64 `json:"logits"`
		Target []int       `json:"target"`
		peerTokens
	}
	type peerCase struct {
		Name         string  `json:"name"`
		Agg          string  `json:"agg"`
		KL           string  `json:"kl"`
		Beta         float64 `json:"beta"`
		EntropyCoeff float64 `json:"entropy_coeff"`
		EpsLow       float64 `json:"eps_low"`
		EpsHigh      float64 `json:"eps_high"`
	}
	var in peerBatch[peerSeq, peerCase]
	for i, s := range seqs {
		in.Seqs = append(in.Seqs, peerSeq{logits[i], target[i], tokensOf(s)})
	}
	type tc struct {
		name   string
		o      grpo.LossOptions
		differ bool // a control: verl's numbers are not these
		peer   peerCase
	}
	var cases []tc
	for _, agg := range grpo.Aggregations {
		for _, k := range []struct {
			est  grpo.KLEstimator
			verl string
		}{{grpo.K1, "kl"}, {grpo.K2, "mse"}, {grpo.K3, "low_var_kl"}} {
			name := "entropy 0.2, " + string(k.est) + " 0.3, " + string(agg)
			cases = append(cases, tc{name: name, o: grpo.LossOptions{Aggregation: agg, Beta: 0.3, KL: k.est, EntropyCoeff: 0.2, EpsLow: 0.2, EpsHigh: 0.28},
				peer: peerCase{Name: name, Agg: verlAgg[agg], KL: k.verl, Beta: 0.3, EntropyCoeff: 0.2, EpsLow: 0.2, EpsHigh: 0.28}})
		}
	}
	cases = append(cases,
		tc{name: "entropy 0.01 alone", o: grpo.LossOptions{EntropyCoeff: 0.01},
			peer: peerCase{Name: "entropy 0.01 alone", Agg: "token-mean", EntropyCoeff: 0.01, EpsLow: 0.2, EpsHigh: 0.2}},
		tc{name: "control: a bonus of 0.2 is not verl's without one", o: grpo.LossOptions{EntropyCoeff: 0.2}, differ: true,
			peer: peerCase{Name: "control entropy", Agg: "token-mean", EpsLow: 0.2, EpsHigh: 0.2}})
	for _, c := range cases {
		in.Cases = append(in.Cases, c.peer)
	}
	peer := runPeer(t, py, "peer_entropy.py", in)
	if why, ok := peer["verl_error"]; ok {
		t.Skipf("verl does not import under %s: %s", py, why)
	}
	for _, who := range []string{"verl", "trl"} {
		t.Run("entropies equal "+who+"'s entropy_from_logits", func(t *testing.T) {
			if why, ok := peer[who+"_error"]; ok {
				t.Skipf("%s does not import under %s: %s", who, py, why)
			}
			var h [][]float64
			if err := json.Unmarshal(peer[who+"_entropy"], &h); err != nil || len(h) != len(seqs) {
				t.Fatalf("%s's entropies: %v, %d sequences", who, err, len(h))
			}
			for i, s := range seqs {
				for j, v := range s.Entropies {
					if math.Abs(v-h[i][j]) > 1e-6 {
						t.Errorf("sequence %d token %d: entropy %.9g, %s's %.9g", i, j, v, who, h[i][j])
					}
				}
			}
		})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var want struct {
				Loss float64       `json:"loss"`
				Grad [][][]float64 `json:"grad"`
			}
			if err := json.Unmarshal(peer[c.peer.Name], &want); err != nil || len(want.Grad) != len(seqs) {
				t.Fatalf("verl's case %s: %v, %d sequences, want %d", c.name, err, len(want.Grad), len(seqs))
			}
			st, g, err := grpo.Gradient(seqs, c.o)
			if err != nil {
				t.Fatal(err)
			}
			far, entropyMatters := 0, false
			for i := range seqs {
				for j := range seqs[i].Logprobs {
					gh := g.Entropies[i][j]
					entropyMatters = entropyMatters || gh != 0
					got := logitGrad(logits[i][j], target[i][j], g.Logprobs[i][j], gh)
					for k, v := range got {
						d := math.Abs(v - want.Grad[i][j][k])
						if d > 1e-5 { // ten times the tolerance
							far++
						}
						if d > 1e-6 && !c.differ {
							t.Errorf("∂loss/∂z of sequence %d token %d logit %d: rlpipe %.9g, verl %.9g", i, j, k, v, want.Grad[i][j][k])
						}
					}
				}
			}
			if c.differ {
				if far == 0 {
					t.Errorf("verl's loss without a bonus agrees with rlpipe's %+v everywhere: the comparison cannot tell them apart", c.o)
				}
				return
			}
			if math.Abs(st.Loss-want.Loss) > 1e-6 {
				t.Errorf("loss: rlpipe %.12g, verl %.12g", st.Loss, want.Loss)
			}
			if !entropyMatters {
				t.Error("every entropy gradient is 0: the case does not test the bonus")
			}
		})
	}
}
