package grpo_test

import (
	"math"
	"reflect"
	"testing"

	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// TestPerTokenAdvantages: per-token advantages (PPO's GAE) equal to the
// sequence's advantage give each loss exactly what the sequence
// advantage gives; different ones weigh each token by its own (ppo_clip
// unclipped: ∂ℓ/∂logπ_t = −ρ_t·A_t / tokens); a wrong count is an error.
func TestPerTokenAdvantages(t *testing.T) {
	seqs := func(adv []float64) []grpo.Sequence {
		return []grpo.Sequence{
			{Logprobs: []float64{-0.7, -1.9, -0.4}, OldLogprobs: []float32{-0.72, -1.85, -0.4}, Advantage: 0.5, Advantages: adv},
			{Logprobs: []float64{-1.5}, OldLogprobs: []float32{-1.45}, Advantage: -1},
		}
	}
	for _, l := range []grpo.PolicyLoss{grpo.PPOClip, grpo.GSPO, grpo.CISPO} {
		t.Run(l.Name(), func(t *testing.T) {
			o := grpo.LossOptions{Policy: l}
			st, g, err := grpo.Loss(seqs(nil), o)
			if err != nil {
				t.Fatal(err)
			}
			st2, g2, err := grpo.Loss(seqs([]float64{0.5, 0.5, 0.5}), o)
			if err != nil {
				t.Fatal(err)
			}
			if st != st2 || !reflect.DeepEqual(g, g2) {
				t.Fatalf("per-token advantages equal to the sequence's: loss %+v grads %v, want %+v %v", st2, g2, st, g)
			}
		})
	}
	adv := []float64{2, -1, 0}
	_, g, err := grpo.Loss(seqs(adv), grpo.LossOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for j, a := range adv {
		s := seqs(nil)[0]
		rho := math.Exp(s.Logprobs[j] - float64(s.OldLogprobs[j]))
		if want := -rho * a / 4; math.Abs(g[0][j]-want) > 1e-15 {
			t.Errorf("token %d: gradient %g, want −ρ·A/4 = %g", j, g[0][j], want)
		}
	}
	_, _, err = grpo.Loss(seqs([]float64{1, 2}), grpo.LossOptions{})
	if want := "grpo: sequence 0 has 2 advantages for 3 tokens (give one per token, or none)"; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
}
