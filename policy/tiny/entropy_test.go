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
				a = randomAdapter(t, m, 9)
			}
			batch := testBatch(t, m, 5, 3)
			tr, err := NewTrainer(m, a, TrainConfig{LR: 1e-3})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr.gradients(context.Background(), batch, entropyWeightedLoss); err != nil {
				t.Fatal(err)
			}
			// Without the entropy term the gradient differs: the
			// comparison would see a missing ∂H/∂z.
			plain, err := NewTrainer(m, a, TrainConfig{LR: 1e-3})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := plain.gradients(context.Background(), batch, LossFunc(weightedLoss).entropyFree()); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(3, 4))
			n := len(m.w.flat)
			if a != nil {
				n = len(a.flat)
			}
			var idx []int
			moved := 0
			for k := 0; k < 40; k++ {
				i := rng.IntN(n)
				idx = append(idx, i)
				if math.Abs(float64(tr.grad[i]-plain.grad[i])) > 1e-2*math.Max(math.Abs(float64(tr.grad[i])), 1e-3) {
					moved++
				}
			}
			if moved < 20 {
				t.Errorf("the entropy term moves %d of 40 gradients by more than 1%%: the test does not exercise it", moved)
			}
			checkGradsOf(t, m, a, batch, tr.grad, idx, refEntropyWeightedLoss)
		})
	}
}
