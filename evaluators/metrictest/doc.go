// Package metrictest is the conformance suite every evaluation metric
// (kind.Metric) runs as its test:
//
//	func TestPassAtK(t *testing.T) {
//		metrictest.Run(t, metrictest.Suite{Metric: evaluators.PassAtKMetric, Monotone: metrictest.Rising,
//			Hand: []metrictest.Case{{Correct: "1100", K: 2, Want: 5.0 / 6}}})
//	}
//
// Each scenario is a subtest, over problems of 1 to 8 samples in which a
// correct sample gives the answer "42" with reward 1 and a wrong one
// another answer (or none) with reward 0:
//
//   - "named": a non-empty name without spaces (the summary's metric
//     column).
//   - "deterministic": the same samples give the same value, bit for bit,
//     and the samples are left alone.
//   - "in range": every value is in [0, 1]; all correct gives 1, none
//     correct 0.
//   - "k too large": k = n+1 is an error that wraps
//     evaluators.ErrKTooLarge.
//   - "monotone in k" (Suite.Monotone): the value rises (pass@k) or
//     falls (pass^k) with k, never the other way.
//   - "hand computed": each of Suite.Hand's cases gives its Want within
//     1e-12.
package metrictest
