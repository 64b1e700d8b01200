package tiny

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
)

// entropyWeightedLoss is weightedLoss plus Σ c'·entropy, with weights
// c' = (c − 0.7)/2 from weightedSum's sequence, so that both the
// logprobs' and the entropies' gradients reach the logits.
func entropyWeightedLoss(logprobs, entropies, grad, gradEnt [][]float32) (float64, error) {
	s := weightedSum(logprobs, func(i, j int, c float32) { grad[i][j] = c })
	weightedSum(entropies, func(i, j int, c float32) {
		gradEnt[i][j] = (c - 0.7) / 2
		s += float64(gradEnt[i][j]) * float64(entropies[i][j])
	})
	return s, nil
}

// refEntropyWeightedLoss is entropyWeightedLoss in float64.
func refEntropyWeightedLoss(lp, ent [][]float64) float64 {
	var s float64
	weightedSum(ent, func(i, j int, c float32) { s += float64((c-0.7)/2) * ent[i][j] })
	return weightedSum(lp, nil) + s
}

// TestEntropyGradients: a loss of the entropies (an entropy bonus) has
// the gradient of central differences of the float64 reference, through
// the full distribution of every completion token, for the base weights
// and for a LoRA adapter's factors.
func TestEntropyGradients(t *testing.T) {
	for _, tc := range []struct {
		name string
		lora bool
	}{{"full", false}, {"lora", true}} {
		t.Run(tc.name, func(t *testing.T) {
			m := randomModel(t, smallConfig(), 11)
			var a *Adapter
			if tc.lora {
				var err error
				if a, err = m.NewAdapter(LoRAConfig{Rank: 3, Alpha: 6, Seed: 4}); err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(8, 9))
				for i := range a.flat {
					a.flat[i] = float32(0.3 * rng.NormFloat64())
				}
				a.changed()
			}
			batch := testBatch(t, m, 5, 3)
			tr, err := NewTrainer(m, a, TrainConfig{LR: 1e-3})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr.gradients(context.Background(), batch, entropyWeightedLoss); err != nil {
				t.Fatal(err)
			}
			params := toF64(m.w.flat)
			if a != nil {
				params = toF64(a.flat)
			}
			loss := func() float64 {
				flat := params
				if a != nil {
					flat = refMerge(m, a, params)
				}
				return refEntropyWeightedLoss(refScores(m, flat, batch))
			}
			// Without the entropy term the gradient differs: the
			// comparison below would see a missing ∂H/∂z.
			plain, err := NewTrainer(m, a, TrainConfig{LR: 1e-3})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := plain.gradients(context.Background(), batch, LossFunc(weightedLoss).entropyFree()); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(3, 4))
			const eps = 1e-5
			worst, moved := 0.0, 0
			for k := 0; k < 40; k++ {
				i := rng.IntN(len(params))
				if math.Abs(float64(tr.grad[i]-plain.grad[i])) > 1e-2*math.Max(math.Abs(float64(tr.grad[i])), 1e-3) {
					moved++
				}
				orig := params[i]
				params[i] = orig + eps
				up := loss()
				params[i] = orig - eps
				down := loss()
				params[i] = orig
				fd := (up - down) / (2 * eps)
				g := float64(tr.grad[i])
				err := math.Abs(fd-g) / math.Max(math.Max(math.Abs(fd), math.Abs(g)), 1e-3)
				worst = math.Max(worst, err)
				if err > 1e-3 {
					t.Errorf("%s (index %d): analytic %.7g, finite difference %.7g", paramName(m, a, i), i, g, fd)
				}
			}
			t.Logf("worst relative error over 40 parameters: %.2g; the entropy term moves %d of their gradients by more than 1%%", worst, moved)
			if moved < 20 {
				t.Errorf("the entropy term moves %d of 40 gradients by more than 1%%: the test does not exercise it", moved)
			}
		})
	}
}
