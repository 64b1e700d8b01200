package evaluators

import (
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline/kind"
)

// PassAtKMetric is pass@k, the probability that one of k samples is
// correct (PassAtK).
var PassAtKMetric kind.Metric = passAtK{}

type passAtK struct{}

func (passAtK) Name() string { return tables.MetricPassAtK }

func (passAtK) Value(s kind.MetricSamples, k int) (float64, error) {
	return PassAtK(len(s.Correct), countTrue(s.Correct), k)
}

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
