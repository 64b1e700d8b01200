package advantages_test

import (
	"math"
	"reflect"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/advantages/estimatortest"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// truncatedBatch: a has two samples that hit the length limit (rewards 0),
// b's only truncated sample is the one reward that differs, c is a
// zero-variance group with a truncated sample, d's truncated sample also
// timed out.
func truncatedBatch() ([]tables.Trajectory, []tables.Reward) {
	ok := tables.StatusOK
	long := func(p string, i int32, status string, toks ...int32) tables.Trajectory {
		t := traj(p, i, status, toks...)
		t.FinishReason = advantages.FinishLength
		return t
	}
	stop := func(p string, i int32) tables.Trajectory {
		t := traj(p, i, ok, 1, 2)
		t.FinishReason = "stop"
		return t
	}
	trajs := []tables.Trajectory{
		stop("a", 0), long("a", 1, ok, 3), stop("a", 2), long("a", 3, ok, 4),
		stop("b", 0), stop("b", 1), long("b", 2, ok, 5),
		stop("c", 0), long("c", 1, ok, 6),
		stop("d", 0), stop("d", 1), long("d", 2, tables.StatusTimeout),
	}
	rewards := []tables.Reward{rew("a", 0, 1), rew("a", 1, 0), rew("a", 2, 1), rew("a", 3, 0),
		rew("b", 0, 1), rew("b", 1, 1), rew("b", 2, 0),
		rew("c", 0, 1), rew("c", 1, 1),
		rew("d", 0, 1), rew("d", 1, 0), {PromptID: "d", SampleIndex: 2, Status: tables.StatusTimeout, Total: math.NaN()}}
	return trajs, rewards
}

// TestMaskTruncated: with MaskTruncated, the samples that stopped at the
// length limit are masked as "truncated" but keep their reward in their
// group's mean and std (TRL's mask_truncated_completions), so b's two
// others train on b's spread; a truncated sample that also failed keeps
// the failure's reason; without the option they train.
func TestMaskTruncated(t *testing.T) {
	trajs, rewards := truncatedBatch()
	// b: rewards 1, 1, 0: mean 2/3, population std √2/3 (the population
	// std keeps the hand figures round).
	bAdv := (1 - 2.0/3) / (math.Sqrt(2)/3 + 1e-6)
	pop := advantages.Options{PopulationStd: true}
	for _, tc := range []struct {
		name      string
		o         advantages.TrainOptions
		want      string
		truncated int
	}{
		{"off", advantages.TrainOptions{Options: pop},
			"a0:+1.000 a1:-1.000 a2:+1.000 a3:-1.000 b0:+0.707 b1:+0.707 b2:-1.414 c0:zero reward variance c1:zero reward variance d0:+1.000 d1:-1.000 d2:trajectory status timeout", 0},
		{"on", advantages.TrainOptions{Options: pop, MaskTruncated: true},
			"a0:+1.000 a1:truncated a2:+1.000 a3:truncated b0:+0.707 b1:+0.707 b2:truncated c0:zero reward variance c1:truncated d0:+1.000 d1:-1.000 d2:trajectory status timeout", 4},
		{"on, keep zero std", advantages.TrainOptions{Options: pop, MaskTruncated: true, KeepZeroStd: true},
			"a0:+1.000 a1:truncated a2:+1.000 a3:truncated b0:+0.707 b1:+0.707 b2:truncated c0:+0.000 c1:truncated d0:+1.000 d1:-1.000 d2:trajectory status timeout", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := joined(t, trajs, rewards, tc.o, tc.want)
			truncated := 0
			for _, a := range b.Advantages {
				if a.Reason == advantages.ReasonTruncated {
					truncated++
				}
			}
			if truncated != tc.truncated {
				t.Errorf("%d rows masked %q, want %d", truncated, advantages.ReasonTruncated, tc.truncated)
			}
			// The statistics are the same either way: the truncated
			// samples stay in them. b0 is row 4.
			if a := b.Advantages[4]; math.Abs(a.Advantage-bAdv) > 1e-12 || a.GroupMean != 2.0/3 || a.GroupSize != 3 {
				t.Errorf("b0 %+v, want advantage %v over a group of 3 with mean 2/3", a, bAdv)
			}
			if b.Stats != (advantages.Stats{Groups: 4, MultiSample: 4, ZeroStd: 1, Masked: 1}) {
				t.Errorf("stats %+v", b.Stats)
			}
			// Given reads the rows back to the same batch.
			g, err := advantages.Given(trajs, rewards, b.Advantages)
			if err != nil || !reflect.DeepEqual(g.Advantages, b.Advantages) || g.Stats != b.Stats {
				t.Errorf("Given: %v, stats %+v", err, g.Stats)
			}
		})
	}
}

// TestMaskTruncatedVersion: the option enters the advantages task's
// version only when set, last, and ParseVersion reads it back beside the
// other options.
func TestMaskTruncatedVersion(t *testing.T) {
	const base = "join-2 epsilon=1e-06 no_std=false keep_zero_std=false"
	half := estimatortest.Half
	for _, tc := range []struct {
		name string
		o    advantages.TrainOptions
		want string
	}{
		{"off", advantages.TrainOptions{}, base + " std=sample"},
		{"on", advantages.TrainOptions{MaskTruncated: true}, base + " std=sample mask_truncated_completions=true"},
		{"with population std and an estimator", advantages.TrainOptions{Options: advantages.Options{PopulationStd: true, Estimator: half}, MaskTruncated: true},
			base + " estimator=half mask_truncated_completions=true"},
		{"with gae's gamma and lambda", advantages.TrainOptions{Options: advantages.Options{Estimator: advantages.GAEEstimator, Gamma: 1, Lambda: 0.95}, MaskTruncated: true},
			base + " std=sample estimator=gae gamma=1 lambda=0.95 mask_truncated_completions=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.o.Version(); got != tc.want {
				t.Fatalf("Version() = %q, want %q", got, tc.want)
			}
			got, err := advantages.ParseVersion(tc.want, advantages.GRPO, half, advantages.GAEEstimator)
			if err != nil || got.MaskTruncated != tc.o.MaskTruncated || got.Version() != tc.want {
				t.Errorf("ParseVersion(%q) = %+v, %v", tc.want, got, err)
			}
		})
	}
	const bad = base + " mask_truncated_completions=false"
	const want = `advantages task version "` + bad + `": not one this code writes (it would write "` + base + `")`
	if _, err := advantages.ParseVersion(bad); err == nil || err.Error() != want {
		t.Errorf("ParseVersion(%q) = %v, want %s", bad, err, want)
	}
}

// TestTrainTaskMasksTruncated: the advantages step writes the truncated
// samples' rows with reason "truncated" to advantages.parquet.
func TestTrainTaskMasksTruncated(t *testing.T) {
	st, r := openRun(t)
	trajs, rewards := truncatedBatch()
	o := advantages.TrainOptions{MaskTruncated: true}
	n := runTask(t, st, r, 1, advantages.TrainTask(o), trajs, rewards)
	out, err := n.Result(advantages.OutAdvantages)
	if err != nil {
		t.Fatal(err)
	}
	got := readAdvantages(t, st, r.Branch(), out.Path)
	var reasons []string
	for _, a := range got {
		reasons = append(reasons, a.Reason)
	}
	want := []string{"", "truncated", "", "truncated", "", "", "truncated", "zero reward variance", "truncated", "", "", "trajectory status timeout"}
	if !reflect.DeepEqual(reasons, want) {
		t.Errorf("reasons\n got %q\nwant %q", reasons, want)
	}
}
