package embedded_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/rollouts/rolloutstest"
	"github.com/rlpipe/rlpipe/trainers/embedded"
)

// TestPPOLearnsWithOneSample: PPO (gae and the critic) learns with one
// sample per prompt, where GRPO has no group to compare a sample with
// and masks every one: 24 iterations of 32 prompts × 1 sample raise the
// train reward and the held-out exact pass@1. The run is deterministic,
// so the figures are exact.
func TestPPOLearnsWithOneSample(t *testing.T) {
	if testing.Short() {
		t.Skip("the learning test trains for 24 iterations")
	}
	const iterations, batch = 24, 32
	ctx := context.Background()
	m := embeddedModel(t)
	st := newStore(t, iterations*batch)
	r := openRun(t, st, "ppo", 1)
	o := ppoOptions(0)
	o.LR = 2e-3
	s := standin.Stages(standin.Options{})
	stages := pipeline.Stages{Sample: s.Sample, Generate: rolloutstest.EmbeddedGenerate(t, m, 1), Reward: rewardTask(), Train: embedded.Task(m, o)}
	if _, err := r.Loop(ctx, loopConfig(iterations, batch), stages); err != nil {
		t.Fatal(err)
	}
	var rewards []float64
	for k := 1; k <= iterations; k++ {
		var met embedded.Metrics
		if err := json.Unmarshal(standintest.Read(t, st, r.Branch(), fmt.Sprintf("iterations/%06d/train_metrics.json", k)), &met); err != nil {
			t.Fatal(err)
		}
		if met.Used != batch || met.PPOFigures == nil {
			t.Fatalf("iteration %d trained on %d of %d samples (PPO figures %v)", k, met.Used, batch, met.PPOFigures)
		}
		rewards = append(rewards, met.Reward.Mean)
	}
	mean := func(xs []float64) float64 {
		var s float64
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	first, last := mean(rewards[:6]), mean(rewards[iterations-6:])
	problems := tiny.HeldOutProblems(200)
	base, err := m.ExpectedPass1(ctx, nil, problems)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(base-wantBase) > 1e-9 {
		t.Fatalf("base pass@1 %.12f, want TestLearns's %.12f", base, wantBase)
	}
	a, err := m.LoadAdapter(standintest.Fetch(t, st, r.Branch(), fmt.Sprintf("iterations/%06d/adapter", iterations)))
	if err != nil {
		t.Fatal(err)
	}
	final, err := m.ExpectedPass1(ctx, a, problems)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("train reward, mean of iterations 1–6 %.12f, of %d–%d %.12f; held-out exact pass@1 %.12f → %.12f", first, iterations-5, iterations, last, base, final)
	if !(last > first+0.1) || !(final > base+0.1) {
		t.Errorf("PPO with n: 1 does not learn: train reward %.4f → %.4f, held-out %.4f → %.4f", first, last, base, final)
	}
	for i, got := range []float64{first, last, final} {
		if want := wantPPO[i]; math.Abs(got-want) > 1e-9 {
			t.Errorf("figure %d is %.12f, want %.12f", i, got, want)
		}
	}
}

// The figures of TestPPOLearnsWithOneSample: the train reward's means
// over iterations 1–6 and 19–24, and the held-out pass@1 after 24
// (from wantBase, +35.89 points).
var wantPPO = []float64{0.479166666667, 0.697916666667, 0.688421668528}
