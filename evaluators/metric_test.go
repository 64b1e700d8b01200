package evaluators_test

import (
	"testing"

	"github.com/rlpipe/rlpipe/evaluators"
	"github.com/rlpipe/rlpipe/evaluators/metrictest"
)

// TestMetrics runs each shipped metric through the metrics' suite, with
// problems worked out by hand.
func TestMetrics(t *testing.T) {
	suites := []struct {
		name string
		s    metrictest.Suite
	}{
		// The mean reward of all samples, whatever k: 2 of 4.
		{"avg@k", metrictest.Suite{Metric: evaluators.AvgAtK, Hand: []metrictest.Case{
			{Correct: "1100", K: 3, Want: 0.5}}}},
		// 1 − C(2,2)/C(4,2) = 1 − 1/6; 1 − C(3,1)/C(4,1) = 1/4.
		{"pass@k", metrictest.Suite{Metric: evaluators.PassAtKMetric, Monotone: metrictest.Rising, Hand: []metrictest.Case{
			{Correct: "1100", K: 2, Want: 5.0 / 6}, {Correct: "0001", K: 1, Want: 0.25}}}},
		// C(2,2)/C(4,2) = 1/6; C(3,2)/C(4,2) = 1/2.
		{"pass^k", metrictest.Suite{Metric: evaluators.PassHatKMetric, Monotone: metrictest.Falling, Hand: []metrictest.Case{
			{Correct: "1100", K: 2, Want: 1.0 / 6}, {Correct: "1110", K: 2, Want: 0.5}}}},
		// Of the 3 pairs of "110" (answers 42, 42, 7), {42, 42} votes
		// right, the two {42, 7} ties count half: (1 + ½ + ½)/3. Of the
		// three samples with answers 42, 7, 7 the majority of all three
		// is wrong.
		{"maj@k", metrictest.Suite{Metric: evaluators.MajAtKMetric, Hand: []metrictest.Case{
			{Correct: "110", K: 2, Want: 2.0 / 3}, {Correct: "100", K: 3, Want: 0}}}},
	}
	for _, tc := range suites {
		t.Run(tc.name, func(t *testing.T) { metrictest.Run(t, tc.s) })
	}
}
