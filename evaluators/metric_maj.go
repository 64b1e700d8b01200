package evaluators

import (
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline/kind"
)

// MajAtKMetric is maj@k, the expected accuracy of a majority vote over k
// samples' answers (MajAtK).
var MajAtKMetric kind.Metric = majAtK{}

type majAtK struct{}

func (majAtK) Name() string { return tables.MetricMajAtK }

func (majAtK) Value(s kind.MetricSamples, k int) (float64, error) {
	return MajAtK(s.Answers, s.Correct, k)
}
