package evaluators

import (
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline/kind"
)

// PassHatKMetric is pass^k, the probability that k samples are all
// correct (PassHatK).
var PassHatKMetric kind.Metric = passHatK{}

type passHatK struct{}

func (passHatK) Name() string { return tables.MetricPassHatK }

func (passHatK) Value(s kind.MetricSamples, k int) (float64, error) {
	return PassHatK(len(s.Correct), countTrue(s.Correct), k)
}
