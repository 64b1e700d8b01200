package evaluators

import "github.com/rlpipe/rlpipe/artifacts/tables"

// PassHatKMetric is pass^k, the registry's metric of PassHatK.
var PassHatKMetric = newMetric(tables.MetricPassHatK, func(s scoredSamples, k int) (float64, error) {
	return PassHatK(len(s.Correct), countTrue(s.Correct), k)
})

// PassHatK is pass^k: the probability that k samples drawn without
// replacement are all correct, C(c, k)/C(n, k) = Π_{i<k} (c−i)/(n−i).
func PassHatK(n, c, k int) (float64, error) {
	if err := checkK(n, c, k); err != nil {
		return 0, err
	}
	if c < k {
		return 0, nil
	}
	prod := 1.0
	for i := 0; i < k; i++ {
		prod *= float64(c-i) / float64(n-i)
	}
	return prod, nil
}
