package kind

import (
	"errors"

	"github.com/rlpipe/rlpipe/internal/registry"
)

// A Metric is an evaluation metric at k (pass@k, maj@k, …): evaluation
// computes each registered metric at every k of the eval section for
// every problem, and reports its mean over the problems with a bootstrap
// interval, one eval_summary row per metric and k, sorted by Name then
// k. A metric is one small file (evaluators/pass.go) and one entry in
// Metrics in cli/kinds; its test runs evaluators/metrictest.
type Metric interface {
	// Name is the eval_summary rows' metric column ("pass@k").
	Name() string
	// Value is one problem's value at k from its samples that were
	// scored (status ok), in sample order. k larger than the samples is
	// an error (evaluators.ErrKTooLarge); the value must be deterministic.
	Value(s MetricSamples, k int) (float64, error)
}

// MetricSamples are one problem's scored samples, column by column: each
// sample's correctness (the reward spec's rule), extracted answer ("" for
// none) and total reward.
type MetricSamples struct {
	Correct []bool
	Answers []string
	Rewards []float64
}

// ErrUnknownMetric is a metric name the registry lacks.
var ErrUnknownMetric = errors.New("unknown evaluation metric")

// Metrics are the evaluation metrics a program offers.
type Metrics []Metric

// Names lists the names, sorted; Lookup finds one by name (an unknown
// name is an ErrUnknownMetric that lists them).
func (ms Metrics) Names() []string { return registry.Names(ms) }
func (ms Metrics) Lookup(name string) (Metric, error) {
	return registry.Lookup(ms, name, ErrUnknownMetric)
}
