package reports

import (
	"slices"
	"strconv"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts/runs"
)

// MetricExact is the exact expected pass@1 an evaluator may report beside
// the sampled metrics (evaluators.MetricExact).
const MetricExact = "exact_pass@1"

// Eval is one evaluated checkpoint on one eval set (runs.Eval).
type Eval = runs.Eval

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

// setEvals keeps the evaluations on set, in the order of evals.
func setEvals(evals []Eval, set string) []Eval {
	var out []Eval
	for _, e := range evals {
		if e.Set == set {
			out = append(out, e)
		}
	}
	return out
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
