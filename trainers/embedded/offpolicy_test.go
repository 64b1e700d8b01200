package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/rlpipe/rlpipe/trainers/embedded"
)

// A sample without logprobs is rescored with the trainer's adapter before
// the update: exact on-policy, but a stale sample (staleness > 0) would
// then be anchored on adapter N−1 instead of the one that sampled it, so
// it fails the update naming the row, unless rescore_stale says so.
func TestStaleSampleWithoutLogprobs(t *testing.T) {
	m := embeddedModel(t)
	cases := []struct {
		name      string
		staleness int32
		logprobs  bool
		o         embedded.Options
		wantErr   bool
	}{
		{"on-policy without logprobs is rescored", 0, false, embedded.Options{}, false},
		{"stale with logprobs trains on them", 1, true, embedded.Options{}, false},
		{"stale without logprobs fails", 2, false, embedded.Options{}, true},
		{"stale without logprobs and rescore_stale is rescored", 2, false, embedded.Options{RescoreStale: true}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := sampleBatch(t, m, nil, 2, 1)
			b.Rewards[0].Total, b.Rewards[8].Total = 1, 1
			b.Rewards[1].Total, b.Rewards[9].Total = 0, 0
			tr := &b.Trajectories[5]
			tr.Staleness = tc.staleness
			if !tc.logprobs {
				tr.Logprobs = nil
			}
			res, err := newTrainer(t, m, tc.o).Update(context.Background(), b)
			if tc.wantErr {
				want := fmt.Sprintf("inconsistent training batch: a stale sample has no behaviour logprobs: sample 5 of prompt %q was drawn 2 update(s) before the trainer's adapter, "+
					"which would rescore it and anchor the ratio on a policy that did not sample it; have the policy return logprobs, "+
					"run on-policy (overlap.max_staleness: 0), or set trainer.rescore_stale: true to accept it", tr.PromptID)
				if !errors.Is(err, embedded.ErrStaleNoLogprobs) || !errors.Is(err, embedded.ErrBatch) || err.Error() != want {
					t.Fatalf("error %v\nwant ErrStaleNoLogprobs saying\n%s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Metrics.OptimizerSteps != 1 || res.Metrics.Used != 16 {
				t.Fatalf("metrics %+v: want one step on all 16 samples", res.Metrics)
			}
		})
	}
}

// rescore_stale enters the train task's version only when set, so the
// versions (and cache keys) of every existing configuration stay as they
// were.
func TestRescoreStaleVersion(t *testing.T) {
	m := embeddedModel(t)
	base, err := embedded.Options{}.Version(m)
	if err != nil {
		t.Fatal(err)
	}
	set, err := embedded.Options{RescoreStale: true}.Version(m)
	if err != nil {
		t.Fatal(err)
	}
	if base == set {
		t.Errorf("rescore_stale keeps the version %s", base)
	}
	// The default version as it was before rescore_stale existed, but for
	// CodeVersion 4 (the sample std, issue 36).
	if want := "grpo-embedded-4-7f641a25bcb13605"; base != want {
		t.Errorf("default version %s, want %s", base, want)
	}
}

// mismatch_kl and ratio_max measure the trainer's policy against the
// sampler's logprobs before the update: exactly 0 and 1 on-policy (the
// embedded sampler and trainer share their numerics), larger when the
// same samples come back one update stale; with one minibatch they are the
// first step's figures.
func TestMismatchMetrics(t *testing.T) {
	m := embeddedModel(t)
	tr := newTrainer(t, m, embedded.Options{})
	b := sampleBatch(t, m, nil, 16, 3)
	on, err := tr.Update(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	stale, err := tr.Update(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("on-policy mismatch_kl %.3g ratio_max %.6g; one update stale %.3g, %.6g", on.Metrics.MismatchKL, on.Metrics.RatioMax, stale.Metrics.MismatchKL, stale.Metrics.RatioMax)
	if on.Metrics.MismatchKL != 0 || on.Metrics.RatioMax != 1 {
		t.Errorf("on-policy: mismatch_kl %g, ratio_max %g; want 0 and 1", on.Metrics.MismatchKL, on.Metrics.RatioMax)
	}
	if on.Metrics.ClipDual != nil {
		t.Errorf("clip_frac_dual %v without dual_clip: want it left out", *on.Metrics.ClipDual)
	}
	s0 := stale.Metrics.Steps[0]
	if stale.Metrics.MismatchKL != s0.BehaviourKL || stale.Metrics.RatioMax != s0.RatioMax {
		t.Errorf("mismatch %+v, want the one step's behaviour_kl %g and ratio_max %g", stale.Metrics.OffPolicy, s0.BehaviourKL, s0.RatioMax)
	}
	if !(stale.Metrics.MismatchKL > 100*on.Metrics.MismatchKL) || !(stale.Metrics.RatioMax > on.Metrics.RatioMax) {
		t.Errorf("one update stale: mismatch_kl %g, ratio_max %g; want both above the on-policy %g, %g",
			stale.Metrics.MismatchKL, stale.Metrics.RatioMax, on.Metrics.MismatchKL, on.Metrics.RatioMax)
	}
}

// dual_clip enters the version only when set; its message names the
// key and the usual value.
func TestDualClipOption(t *testing.T) {
	m := embeddedModel(t)
	o := embedded.Options{DualClip: 1}
	o.EnsureDefaults()
	if err := o.Validate(); err == nil || err.Error() != "invalid trainer options: dual_clip: 1; it must be above 1 (3 is usual), or 0 for off" {
		t.Errorf("dual_clip 1: %v", err)
	}
	base, _ := embedded.Options{}.Version(m)
	set, _ := embedded.Options{DualClip: 3}.Version(m)
	if base != "grpo-embedded-4-7f641a25bcb13605" || set == base {
		t.Errorf("versions: default %s (want the one before dual_clip existed), dual_clip 3 %s", base, set)
	}
}
