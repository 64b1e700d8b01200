package tiny

import (
	"context"
	"strings"
	"testing"
)

// TestNoGradientKeepsEveryBit trains on a batch in which every third
// example's loss weight is zero, with and without marking those examples
// NoGradient (their backward pass skipped): the gradient, the loss and
// the gradient norm are the same to the bit, for full weights and for
// LoRA, on one worker and on two, over shards holding marked examples
// first, last and between the others.
func TestNoGradientKeepsEveryBit(t *testing.T) {
	zero := func(i int) bool { return i%3 == 0 }
	loss := func(logprobs, _, grad, _ [][]float32) (float64, error) {
		return weightedSum(logprobs, func(i, j int, c float32) {
			if !zero(i) {
				grad[i][j] = c
			}
		}), nil
	}
	for _, lora := range []bool{false, true} {
		for _, workers := range []int{1, 2} {
			var grads [2][]float32
			var stats [2]StepStats
			for k, mark := range []bool{false, true} {
				m, a := shardedModel(t, lora)
				tr := newTrainer(t, m, a, TrainConfig{LR: 1e-3, Shards: 3, Workers: workers})
				batch := testBatch(t, m, 11, 4)
				for i := range batch {
					batch[i].NoGradient = mark && zero(i)
				}
				st, err := tr.gradients(context.Background(), batch, loss)
				if err != nil {
					t.Fatal(err)
				}
				grads[k], stats[k] = tr.grad, st
				skipped := 0
				for _, s := range tr.shards {
					skipped += s.a.rows - s.live
				}
				if want := mark; (skipped > 0) != want {
					t.Fatalf("marked %v: the backward pass skipped %d rows", mark, skipped)
				}
			}
			if !equalBits(grads[0], grads[1]) || stats[0] != stats[1] {
				t.Errorf("lora %v, %d workers: the gradient with NoGradient marks differs from the one without (%+v, %+v)", lora, workers, stats[0], stats[1])
			}
		}
	}
}

// TestNoGradientWithAGradientFails marks an example NoGradient that the
// loss gives a gradient: the step fails naming it, and takes no step.
func TestNoGradientWithAGradientFails(t *testing.T) {
	m := randomModel(t, smallConfig(), 3)
	tr := newTrainer(t, m, nil, TrainConfig{LR: 1e-3})
	batch := testBatch(t, m, 4, 4)
	batch[2].NoGradient = true
	_, err := tr.Step(context.Background(), batch, weightedLoss)
	if err == nil || !strings.Contains(err.Error(), "example 2 is marked NoGradient, but the loss gave its tokens a gradient") {
		t.Fatalf("step with a marked example given a gradient: %v", err)
	}
	if tr.Steps() != 0 {
		t.Fatalf("%d steps taken after the failure", tr.Steps())
	}
}
