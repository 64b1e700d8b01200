package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline"
)

// iterationReport is one committed iteration in a line: the trainer's
// figures, the time each stage took, and the evaluations committed with
// it, one line each.
func iterationReport(ctx context.Context, st artifacts.Store, branch string, n int) []string {
	var parts []string
	if f, err := runs.ReadTrainMetrics(ctx, st, branch, n); err == nil && f != nil {
		for _, fig := range []struct{ name, format string }{
			{"reward.mean", "reward %.3f"},
			{"reward_components.correct.mean", "accuracy %.3f"},
			{"loss", "loss %+.4f"},
			{"kl", "kl %.4f"},
			{"frac_reward_zero_std", "zero-std groups %.2f"},
		} {
			if v, ok := f.Get(fig.name); ok {
				parts = append(parts, fmt.Sprintf(fig.format, v))
			}
		}
	}
	if m, err := runs.ReadMetrics(ctx, st, branch, n); err == nil && m != nil {
		{
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
	cps := []int{n}
	if n == 1 {
		cps = []int{0, 1} // the starting policy is evaluated in iteration 1
	}
	evals, err := runs.ReadCheckpointEvals(ctx, st, branch, cps...)
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

// stageOrder sorts task names in loop order: the slots and the steps
// this program's kinds and registry add (kinds.TaskOrder).
func stageOrder(name string) int { return pipeline.TaskRank(taskOrder, name) }

var taskOrder = kinds.TaskOrder()
