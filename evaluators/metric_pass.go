package evaluators

import "github.com/rlpipe/rlpipe/artifacts/tables"

// PassAtKMetric is pass@k, the registry's metric of PassAtK.
var PassAtKMetric = newMetric(tables.MetricPassAtK, func(s scoredSamples, k int) (float64, error) {
	return PassAtK(len(s.Correct), countTrue(s.Correct), k)
})

// PassAtK is the unbiased estimator of pass@k from n samples of which c
// are correct: 1 − C(n−c, k)/C(n, k), the probability that k samples
// drawn without replacement include a correct one. It is computed as the
// product 1 − Π_{i=n−c+1..n} (1 − k/i), which stays exact where the
// binomials overflow; it is 1 when n − c < k.
func PassAtK(n, c, k int) (float64, error) {
	if err := checkK(n, c, k); err != nil {
		return 0, err
	}
	if n-c < k {
		return 1, nil
	}
	prod := 1.0
	for i := n - c + 1; i <= n; i++ {
		prod *= 1 - float64(k)/float64(i)
	}
	return 1 - prod, nil
}
