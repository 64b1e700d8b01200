package evaluators

import (
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline/kind"
)

// AvgAtK is avg@k, the mean reward of k samples: drawn without
// replacement, its unbiased estimate is the mean reward of all n.
var AvgAtK kind.Metric = avgAtK{}

type avgAtK struct{}

func (avgAtK) Name() string { return tables.MetricAvgAtK }

func (avgAtK) Value(s kind.MetricSamples, k int) (float64, error) {
	if err := checkK(len(s.Rewards), 0, k); err != nil {
		return 0, err
	}
	sum := 0.0
	for _, r := range s.Rewards {
		sum += r
	}
	return sum / float64(len(s.Rewards)), nil
}
