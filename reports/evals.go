package reports

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// MetricExact is the exact expected pass@1 an evaluator may report beside
// the sampled metrics (evaluators.MetricExact).
const MetricExact = "exact_pass@1"

// Eval is one evaluated checkpoint on one eval set. Metrics maps a metric
// at its k ("pass@1", "pass@8", "maj@4", "exact_pass@1") to its value,
// Intervals to its 95% interval.
type Eval struct {
	Iteration  int                   `json:"iteration"` // 0: the starting policy
	Checkpoint string                `json:"checkpoint"`
	Set        string                `json:"set"`
	Problems   int                   `json:"problems"`
	N          int                   `json:"n"`
	Metrics    map[string]float64    `json:"metrics"`
	Intervals  map[string][2]float64 `json:"intervals"`
}

// ReadEvals reads every evals/NNNNNN/<set>/summary.parquet at ref, by
// iteration then set.
func ReadEvals(ctx context.Context, st artifacts.Store, ref string) ([]Eval, error) {
	out := []Eval{}
	for e, err := range st.ListObjects(ctx, ref, &artifacts.ListOptions{Prefix: evalsPrefix}) {
		if err != nil {
			return nil, fmt.Errorf("list %s:%s: %w", ref, evalsPrefix, err)
		}
		parts := strings.Split(e.Path, "/")
		if len(parts) != 4 || parts[3] != "summary.parquet" {
			continue
		}
		n, err := strconv.Atoi(parts[1])
		if err != nil {
			continue
		}
		rows, err := readTable(ctx, st, ref, e.Path, tables.EvalSummary)
		if err != nil {
			return nil, err
		}
		ev := Eval{Iteration: n, Set: parts[2], Metrics: map[string]float64{}, Intervals: map[string][2]float64{}}
		for _, r := range rows {
			ev.Checkpoint, ev.Problems = r.Checkpoint, int(r.NumProblems)
			ev.N = max(ev.N, int(r.N))
			name := r.Metric
			if strings.HasSuffix(name, "@k") {
				name = strings.TrimSuffix(name, "k") + strconv.Itoa(int(r.K))
			}
			ev.Metrics[name] = r.Value
			ev.Intervals[name] = [2]float64{r.CILow, r.CIHigh}
		}
		out = append(out, ev)
	}
	slices.SortStableFunc(out, func(a, b Eval) int {
		if c := cmp.Compare(a.Iteration, b.Iteration); c != 0 {
			return c
		}
		return cmp.Compare(a.Set, b.Set)
	})
	return out, nil
}

// evalSets lists the sets in evals, in name order.
func evalSets(evals []Eval) []string {
	var sets []string
	for _, e := range evals {
		if !slices.Contains(sets, e.Set) {
			sets = append(sets, e.Set)
		}
	}
	slices.Sort(sets)
	return sets
}

// passKs lists the k of the pass@k metrics in evals, ascending.
func passKs(evals []Eval) []int {
	var ks []int
	for _, e := range evals {
		for m := range e.Metrics {
			if k, err := strconv.Atoi(strings.TrimPrefix(m, "pass@")); err == nil && strings.HasPrefix(m, "pass@") && !slices.Contains(ks, k) {
				ks = append(ks, k)
			}
		}
	}
	slices.Sort(ks)
	return ks
}

// headlineMetric is the metric alarms and summaries follow on an eval
// set: exact_pass@1 when every checkpoint has it, else pass@1.
func headlineMetric(evals []Eval) string {
	if len(evals) == 0 {
		return "pass@1"
	}
	for _, e := range evals {
		if _, ok := e.Metrics[MetricExact]; !ok {
			return "pass@1"
		}
	}
	return MetricExact
}
