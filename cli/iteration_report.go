package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/pipeline"
)

// trainFigures are the fields of a train stage's metrics file the
// iteration report shows; any trainer writing them (the embedded GRPO
// trainer does) gets them printed.
type trainFigures struct {
	Loss     *float64 `json:"loss"`
	KL       *float64 `json:"kl"`
	GradNorm *float64 `json:"grad_norm"`
	Reward   *struct {
		Mean float64 `json:"mean"`
	} `json:"reward"`
	Components map[string]struct {
		Mean float64 `json:"mean"`
	} `json:"reward_components"`
	FracZeroStd *float64 `json:"frac_reward_zero_std"`
}

// iterationReport is one committed iteration in a line: the trainer's
// figures, the time each stage took, and the evaluations committed with
// it, one line each.
func iterationReport(ctx context.Context, st artifacts.Store, branch string, n int) []string {
	var parts []string
	for e, err := range st.ListObjects(ctx, branch, &artifacts.ListOptions{Prefix: fmt.Sprintf("iterations/%06d/", n)}) {
		if err != nil || !strings.HasSuffix(e.Path, "metrics.json") {
			continue
		}
		raw, err := artifacts.ReadObject(ctx, st, branch, e.Path)
		var f trainFigures
		if err != nil || json.Unmarshal(raw, &f) != nil {
			continue
		}
		if f.Reward != nil {
			parts = append(parts, fmt.Sprintf("reward %.3f", f.Reward.Mean))
		}
		if c, ok := f.Components["correct"]; ok {
			parts = append(parts, fmt.Sprintf("accuracy %.3f", c.Mean))
		}
		if f.Loss != nil {
			parts = append(parts, fmt.Sprintf("loss %+.4f", *f.Loss))
		}
		if f.KL != nil {
			parts = append(parts, fmt.Sprintf("kl %.4f", *f.KL))
		}
		if f.FracZeroStd != nil {
			parts = append(parts, fmt.Sprintf("zero-std groups %.2f", *f.FracZeroStd))
		}
		break
	}
	if raw, err := artifacts.ReadObject(ctx, st, branch, fmt.Sprintf("events/%06d.metrics.json", n)); err == nil && raw != nil {
		var m pipeline.IterationMetrics
		if json.Unmarshal(raw, &m) == nil {
			names := make([]string, 0, len(m.Tasks))
			for name := range m.Tasks {
				names = append(names, name)
			}
			sort.Slice(names, func(i, j int) bool {
				a, b := stageOrder(names[i]), stageOrder(names[j])
				return a < b || a == b && names[i] < names[j]
			})
			var times []string
			for _, name := range names {
				t := m.Tasks[name]
				s := fmt.Sprintf("%s %.2fs", name, t.Seconds)
				if t.Cached {
					s = name + " cached"
				}
				times = append(times, s)
			}
			if len(times) > 0 {
				parts = append(parts, "| "+strings.Join(times, " "))
			}
		}
	}
	lines := []string{fmt.Sprintf("iteration %d: %s", n, strings.Join(parts, "  "))}
	evals, err := readEvals(ctx, st, branch)
	if err != nil {
		return lines
	}
	for _, e := range evals {
		if e.Iteration != n && !(n == 1 && e.Iteration == 0) {
			continue
		}
		var ms []string
		for _, c := range evalColumns([]evalOut{e}) {
			ms = append(ms, fmt.Sprintf("%s %.4f", c, e.Metrics[c]))
		}
		lines = append(lines, fmt.Sprintf("  eval %s on %s (%d problems × %d): %s", e.Checkpoint, e.Set, e.Problems, e.N, strings.Join(ms, "  ")))
	}
	return lines
}

// stageOrder sorts task names in loop order.
func stageOrder(name string) int { return pipeline.TaskRank(name) }
