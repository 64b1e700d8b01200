package evaluators

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline/kind"
)

// Problem holds the scored samples of one problem, in sample order.
// Samples whose status is not ok are left out of every metric (they are
// infrastructure failures, not wrong answers); N counts the rest.
type Problem struct {
	ID      string
	Samples []tables.EvalSample
}

// PerProblem is one problem's metric value at one k.
type PerProblem struct {
	ProblemID string
	Metric    string
	K         int
	N         int
	Value     float64
}

// Summarize computes each metric (the registry's: avg@k, pass@k, pass^k
// and maj@k in rlpipe) for every k over problems, each the mean of the
// per-problem values with a 95% bootstrap interval, as eval_summary rows
// (sorted by metric name, then k), and the per-problem values. Every
// problem must have at least k ok samples: a k larger than a problem's n
// is an error naming the problem.
func Summarize(checkpoint, evalset string, problems []Problem, ks []int, metrics kind.Metrics) ([]tables.EvalSummaryRow, []PerProblem, error) {
	if len(problems) == 0 {
		return nil, nil, fmt.Errorf("evaluate %s on %s: no problems", checkpoint, evalset)
	}
	if len(metrics) == 0 {
		return nil, nil, fmt.Errorf("evaluate %s on %s: no metrics: list them in the registry (kind.Registry's Metrics)", checkpoint, evalset)
	}
	ks = append([]int(nil), ks...)
	sort.Ints(ks)
	metrics = slices.Clone(metrics)
	slices.SortStableFunc(metrics, func(a, b kind.Metric) int { return strings.Compare(a.Name(), b.Name()) })
	samples := make([]kind.MetricSamples, len(problems))
	for i, p := range problems {
		samples[i] = scored(p)
	}
	var rows []tables.EvalSummaryRow
	var per []PerProblem
	for _, m := range metrics {
		metric := m.Name()
		for _, k := range ks {
			values := make([]float64, len(problems))
			minN := -1
			for i, p := range problems {
				n := len(samples[i].Correct)
				v, err := m.Value(samples[i], k)
				if err != nil {
					return nil, nil, fmt.Errorf("evaluate %s on %s: problem %s: %s: %w%s", checkpoint, evalset, p.ID, metric, err, leftOut(p))
				}
				values[i] = v
				if minN < 0 || n < minN {
					minN = n
				}
				per = append(per, PerProblem{ProblemID: p.ID, Metric: metric, K: k, N: n, Value: v})
			}
			mean := 0.0
			for _, v := range values {
				mean += v
			}
			mean /= float64(len(values))
			lo, hi := Bootstrap(values, 0)
			rows = append(rows, tables.EvalSummaryRow{Checkpoint: checkpoint, Evalset: evalset, K: int32(k), N: int32(minN),
				Metric: metric, Value: mean, CILow: lo, CIHigh: hi, NumProblems: int32(len(problems))})
		}
	}
	return rows, per, nil
}

// scored are p's samples the metrics count: those whose status is ok.
func scored(p Problem) kind.MetricSamples {
	var s kind.MetricSamples
	for _, x := range p.Samples {
		if x.Status != tables.StatusOK {
			continue
		}
		s.Answers = append(s.Answers, x.Answer)
		s.Correct = append(s.Correct, x.Correct)
		s.Rewards = append(s.Rewards, x.Reward)
	}
	return s
}

// leftOut says which of a problem's samples the metrics left out, by
// status ("; 4 of its 4 samples were left out: 4 reward_nonfinite"), or
// "" when none was: so that n=0 reads as what it is.
func leftOut(p Problem) string {
	by := map[string]int{}
	out := 0
	for _, s := range p.Samples {
		if s.Status != tables.StatusOK {
			by[s.Status]++
			out++
		}
	}
	if out == 0 {
		return ""
	}
	statuses := slices.Sorted(maps.Keys(by))
	parts := make([]string, len(statuses))
	for i, st := range statuses {
		parts[i] = fmt.Sprintf("%d %s", by[st], st)
	}
	return fmt.Sprintf("; %d of its %d samples were left out: %s", out, len(p.Samples), strings.Join(parts, ", "))
}

// scoredSamples are a problem's scored samples as a metric reads them.
type scoredSamples = kind.MetricSamples

// metric is a kind.Metric made of its name and its value.
type metric struct {
	name  string
	value func(s scoredSamples, k int) (float64, error)
}

// newMetric is the metric name whose per-problem value is value.
func newMetric(name string, value func(s scoredSamples, k int) (float64, error)) kind.Metric {
	return metric{name, value}
}

func (m metric) Name() string                                  { return m.name }
func (m metric) Value(s scoredSamples, k int) (float64, error) { return m.value(s, k) }

// countTrue is how many of b are true: a problem's correct samples.
func countTrue(b []bool) int {
	c := 0
	for _, ok := range b {
		if ok {
			c++
		}
	}
	return c
}
