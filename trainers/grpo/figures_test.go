package grpo_test

import (
	"fmt"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// A zero-variance group is one whose two or more scored samples all got
// the same reward; a group of one has no spread to be zero. Under n: 1
// (PPO's usual batch) no group qualifies, so frac_reward_zero_std is
// null, not the 1.00 every group of one used to make it.
func TestZeroStdGroupsLeaveOutGroupsOfOne(t *testing.T) {
	for _, c := range []struct {
		name string
		// groups are the totals of each prompt's samples
		groups   map[string][]float64
		failed   map[string]int // prompt → how many of its rows failed to score
		estimate advantages.Estimator
		wantZero int
		wantFrac *float64
	}{
		{name: "groups of four", groups: map[string][]float64{"a": {1, 1, 1, 1}, "b": {0, 1, 0, 0}, "c": {0, 0, 0, 0}},
			wantZero: 2, wantFrac: frac(2.0 / 3)},
		{name: "n: 1 under PPO", groups: map[string][]float64{"a": {1}, "b": {0}, "c": {1}},
			estimate: advantages.GAEEstimator, wantZero: 0, wantFrac: nil},
		{name: "n: 1 under grpo", groups: map[string][]float64{"a": {1}, "b": {0}},
			wantZero: 0, wantFrac: nil},
		// b has one scored sample left of two: it is left out of both
		// counts, not a zero-variance group.
		{name: "a group left with one scored sample", groups: map[string][]float64{"a": {1, 1}, "b": {0, 1}, "c": {0, 1}},
			failed: map[string]int{"b": 1}, wantZero: 1, wantFrac: frac(1.0 / 2)},
	} {
		t.Run(c.name, func(t *testing.T) {
			var trajs []tables.Trajectory
			var rows []tables.Reward
			for _, p := range []string{"a", "b", "c"} {
				for i, v := range c.groups[p] {
					trajs = append(trajs, tables.Trajectory{PromptID: p, SampleIndex: int32(i), Status: tables.StatusOK, NumTokens: 3})
					r := tables.Reward{PromptID: p, SampleIndex: int32(i), Total: v, Status: tables.StatusOK}
					if i < c.failed[p] {
						r.Status = "error"
					}
					rows = append(rows, r)
				}
			}
			adv, st := advantages.Compute(rows, advantages.Options{Estimator: c.estimate})
			f := grpo.BatchFigures(trajs, rows, adv, st)
			if f.Groups != len(c.groups) || f.ZeroStdGroups != c.wantZero || fmtFrac(f.FracRewardZeroStd) != fmtFrac(c.wantFrac) {
				t.Errorf("groups %d, zero-std groups %d, frac_reward_zero_std %s; want %d, %d, %s",
					f.Groups, f.ZeroStdGroups, fmtFrac(f.FracRewardZeroStd), len(c.groups), c.wantZero, fmtFrac(c.wantFrac))
			}
		})
	}
}

func fmtFrac(p *float64) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprintf("%.6f", *p)
}

func frac(x float64) *float64 { return &x }
