// Package estimatortest is the conformance suite every advantage
// estimator (advantages.Estimator) runs as its test:
//
//	func TestGRPO(t *testing.T) {
//		estimatortest.Run(t, estimatortest.Suite{Estimator: advantages.GRPO, ZeroMean: true,
//			Hand: []estimatortest.Group{{Rewards: []float64{1, 0, 0, 1}, Want: []float64{1, -1, -1, 1}}}})
//	}
//
// Each scenario is a subtest:
//
//   - "named": the estimator has a non-empty name without spaces (it is
//     written into the advantages task's version).
//   - "row per input": Group returns one advantage per reward, for groups
//     of 2 to 8, and leaves its input alone.
//   - "deterministic": the same group gives the same advantages, bit for
//     bit.
//   - "finite": finite rewards, also all equal (std 0), give finite
//     advantages.
//   - "zero mean" (Suite.ZeroMean): each group's advantages sum to 0,
//     within 1e-9.
//   - "hand computed": each of Suite.Hand's groups gives its Want within
//     1e-9.
//   - "through Compute": advantages.Compute with the estimator keeps one
//     row per reward row in input order, masks an unscored and a lone
//     sample as it does for every estimator (a CriticEstimator's lone
//     sample trains, with Group's value), and gives the scored
//     samples Group's values (a BatchEstimator: its Batch of them, in row
//     order).
package estimatortest
