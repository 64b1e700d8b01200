package losstest

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// Suite is a policy loss and what it promises.
type Suite struct {
	Loss grpo.PolicyLoss
	// RatioSurrogate: the value is a function of the ratio, so at ratio 1
	// the policy loss is −A's aggregated mean (PPOClip, GSPO; not CISPO,
	// whose value is −clip(ρ)·A·logπ).
	RatioSurrogate bool
}

const tol = 1e-12

// batch is a fixed-seed batch of 8 sequences of 1 to 6 tokens, ratios
// near 1 (|logπ − logπ_old| ≤ 0.6), a trainable mask on every third.
func batch(seed uint64) []grpo.Sequence {
	rng := rand.New(rand.NewPCG(seed, 36))
	seqs := make([]grpo.Sequence, 8)
	for i := range seqs {
		n := 1 + rng.IntN(6)
		s := grpo.Sequence{Advantage: rng.NormFloat64()}
		for j := 0; j < n; j++ {
			old := -0.1 - rng.Float64()*3
			s.OldLogprobs = append(s.OldLogprobs, float32(old))
			s.Logprobs = append(s.Logprobs, float64(float32(old))+(rng.Float64()-0.5)*1.2)
			s.RefLogprobs = append(s.RefLogprobs, old+rng.NormFloat64()*0.2)
		}
		if i%3 == 0 {
			s.Trainable = make([]bool, n)
			for j := range s.Trainable {
				s.Trainable[j] = j%2 == 0
			}
		}
		seqs[i] = s
	}
	return seqs
}

// each runs f under every aggregation.
func each(t *testing.T, f func(t *testing.T, agg grpo.Aggregation)) {
	for _, agg := range grpo.Aggregations {
		t.Run(string(agg), func(t *testing.T) { f(t, agg) })
	}
}

// weights are the aggregation's weight of each sequence's tokens.
func weights(seqs []grpo.Sequence, agg grpo.Aggregation) []float64 {
	count := func(s grpo.Sequence) int { return s.Tokens() }
	total, longest, nonEmpty := 0, 0, 0
	for _, s := range seqs {
		total += count(s)
		longest = max(longest, len(s.Logprobs))
		if count(s) > 0 {
			nonEmpty++
		}
	}
	w := make([]float64, len(seqs))
	for i, s := range seqs {
		switch agg {
		case grpo.TokenMean:
			w[i] = 1 / float64(total)
		case grpo.SequenceMean:
			w[i] = 1 / float64(nonEmpty*count(s))
		case grpo.SeqMeanTokenSumNorm:
			w[i] = 1 / float64(nonEmpty*longest)
		}
	}
	return w
}

// Run runs the suite's scenarios against s.Loss.
func Run(t *testing.T, s Suite) {
	t.Helper()
	l := s.Loss
	if l == nil {
		t.Fatal("losstest: Suite.Loss is nil")
	}
	loss := func(t *testing.T, seqs []grpo.Sequence, o grpo.LossOptions) (grpo.LossStats, [][]float64) {
		t.Helper()
		o.Policy = l
		st, g, err := grpo.Loss(seqs, o)
		if err != nil {
			t.Fatalf("%s: %v", l.Name(), err)
		}
		return st, g
	}
	t.Run("named", func(t *testing.T) {
		if n := l.Name(); n == "" || strings.ContainsAny(n, " \t\n=") {
			t.Errorf("name %q: want a non-empty word without spaces or =", n)
		}
	})
	t.Run("finite and deterministic", func(t *testing.T) {
		each(t, func(t *testing.T, agg grpo.Aggregation) {
			seqs := batch(1)
			st, g := loss(t, seqs, grpo.LossOptions{Aggregation: agg, Beta: 0.04})
			st2, g2 := loss(t, seqs, grpo.LossOptions{Aggregation: agg, Beta: 0.04})
			for _, x := range []float64{st.Loss, st.PolicyLoss, *st.KL, st.RatioDev, st.ClipLow, st.ClipHigh} {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					t.Fatalf("figures %+v: not finite", st.LossFigures)
				}
			}
			if st.Loss != st2.Loss || st.PolicyLoss != st2.PolicyLoss {
				t.Errorf("loss %v then %v", st.Loss, st2.Loss)
			}
			for i := range g {
				for j, x := range g[i] {
					if math.IsNaN(x) || math.IsInf(x, 0) || x != g2[i][j] {
						t.Errorf("grad %d/%d = %v then %v", i, j, x, g2[i][j])
					}
				}
			}
			if !slices.EqualFunc(seqs, batch(1), func(a, b grpo.Sequence) bool {
				return slices.Equal(a.Logprobs, b.Logprobs) && slices.Equal(a.OldLogprobs, b.OldLogprobs)
			}) {
				t.Error("the loss changed its input")
			}
		})
	})
	t.Run("zero advantages give a zero policy loss", func(t *testing.T) {
		each(t, func(t *testing.T, agg grpo.Aggregation) {
			seqs := batch(2)
			for i := range seqs {
				seqs[i].Advantage = 0
			}
			st, g := loss(t, seqs, grpo.LossOptions{Aggregation: agg})
			if st.PolicyLoss != 0 || st.Loss != 0 {
				t.Errorf("policy loss %v, loss %v: want 0", st.PolicyLoss, st.Loss)
			}
			for i := range g {
				for j, x := range g[i] {
					if x != 0 {
						t.Errorf("grad %d/%d = %v, want 0", i, j, x)
					}
				}
			}
		})
	})
	t.Run("at ratio 1 the gradient is the policy gradient", func(t *testing.T) {
		each(t, func(t *testing.T, agg grpo.Aggregation) {
			seqs := batch(3)
			for i := range seqs {
				for j := range seqs[i].Logprobs {
					seqs[i].Logprobs[j] = float64(seqs[i].OldLogprobs[j])
				}
			}
			st, g := loss(t, seqs, grpo.LossOptions{Aggregation: agg})
			w := weights(seqs, agg)
			var want float64
			for i, sq := range seqs {
				for j := range sq.Logprobs {
					wantG := -sq.Advantage * w[i]
					if sq.Trainable != nil && !sq.Trainable[j] {
						wantG = 0
					} else {
						want += wantG
					}
					if math.Abs(g[i][j]-wantG) > tol {
						t.Errorf("grad %d/%d = %v, want −A·w = %v", i, j, g[i][j], wantG)
					}
				}
			}
			if s.RatioSurrogate && math.Abs(st.PolicyLoss-want) > tol {
				t.Errorf("policy loss %v, want the aggregated −A %v", st.PolicyLoss, want)
			}
			if st.ClipLow != 0 || st.ClipHigh != 0 || st.RatioDev != 0 {
				t.Errorf("clip fractions %v %v, ratio dev %v at ratio 1: want 0", st.ClipLow, st.ClipHigh, st.RatioDev)
			}
		})
	})
	t.Run("tokens out of the mask count nowhere", func(t *testing.T) {
		each(t, func(t *testing.T, agg grpo.Aggregation) {
			seqs := batch(4)
			st, g := loss(t, seqs, grpo.LossOptions{Aggregation: agg})
			for i := range seqs {
				if seqs[i].Trainable == nil {
					continue
				}
				for j, ok := range seqs[i].Trainable {
					if !ok {
						seqs[i].Logprobs[j] += 5 // far outside any clip range
						if g[i][j] != 0 {
							t.Errorf("grad %d/%d = %v for a token out of the mask", i, j, g[i][j])
						}
					}
				}
			}
			if st2, _ := loss(t, seqs, grpo.LossOptions{Aggregation: agg}); st2.Loss != st.Loss {
				t.Errorf("moving masked tokens changed the loss from %v to %v", st.Loss, st2.Loss)
			}
		})
	})
}
