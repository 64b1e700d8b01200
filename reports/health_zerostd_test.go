package reports

import (
	"math"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// frac_reward_zero_std counts the groups with two or more scored samples
// only: a group of one has no spread to be zero, so under n: 1 the
// figure is NaN (null in the table), not 1.
func TestHealthZeroStdLeavesOutGroupsOfOne(t *testing.T) {
	ok := tables.StatusOK
	for _, c := range []struct {
		name  string
		rows  map[string][]float64 // each prompt's scored totals
		want  float64              // NaN: undefined
		group int
	}{
		{"n: 1", map[string][]float64{"p1": {1}, "p2": {0}, "p3": {1}}, math.NaN(), 3},
		{"a lone sample beside pairs", map[string][]float64{"p1": {1, 1}, "p2": {0, 1}, "p3": {0}}, 0.5, 3},
		{"pairs", map[string][]float64{"p1": {1, 1}, "p2": {0, 0}}, 1, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			var trajs []tables.Trajectory
			var rws []tables.Reward
			for _, p := range []string{"p1", "p2", "p3"} {
				for i, v := range c.rows[p] {
					trajs = append(trajs, traj(p, int32(i), ok, "42", 2, "stop", 0))
					rws = append(rws, reward(p, int32(i), v, nil))
				}
			}
			h := ComputeHealth(1, trajs, rws, nil, nil)
			same := h.FracZeroStd == c.want || math.IsNaN(h.FracZeroStd) && math.IsNaN(c.want)
			if !same || h.Groups != c.group {
				t.Errorf("frac_reward_zero_std %v over %d groups, want %v over %d", h.FracZeroStd, h.Groups, c.want, c.group)
			}
		})
	}
}
