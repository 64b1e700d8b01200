package evaluators

import "github.com/rlpipe/rlpipe/artifacts/tables"

// AvgAtK is avg@k, the mean reward of k samples: drawn without
// replacement, its unbiased estimate is the mean reward of all n.
var AvgAtK = newMetric(tables.MetricAvgAtK, func(s scoredSamples, k int) (float64, error) {
	if err := checkK(len(s.Rewards), 0, k); err != nil {
		return 0, err
	}
	sum := 0.0
	for _, r := range s.Rewards {
		sum += r
	}
	return sum / float64(len(s.Rewards)), nil
})
