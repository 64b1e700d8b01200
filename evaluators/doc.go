// Package evaluators measures checkpoints on held-out problems the same way
// every time: n samples per problem, scored, then turned into metrics that
// are exact and tested.
//
// Metrics (metrics.go), per problem from n ok samples of which c are
// correct by the reward spec's rule (kind.Scorer.Correctness, a
// tables.Correctness: the spec's `correct:` key, by default its component
// "correct" ≥ 0.5 or else a total > 0; the health table uses the same):
//
//   - pass@k, the unbiased estimator 1 − C(n−c, k)/C(n, k), computed as a
//     product so it stays exact for large n;
//   - pass^k, all k correct: C(c, k)/C(n, k);
//   - avg@k, the mean reward (estimated by the mean of all n);
//   - maj@k, the expected accuracy of a majority vote over k samples
//     (exact, summed over how many samples a subset takes from each answer).
//
// k > n is an error (ErrKTooLarge), never a silently clipped value.
// Samples that failed for infrastructure reasons are left out of n, not
// counted wrong. Summarize averages over problems with a 95% bootstrap
// interval (fixed seed, so reproducible; from 5,000 problems its normal
// limit); Wilson gives the score interval
// of a plain proportion. Tests compare every estimator with brute-force
// enumeration of all k-subsets on random small cases.
//
// Held-out figures mean something only if the problems are held out.
// CompareSets (overlap.go) finds the eval rows a training set has, by
// prompt_id or by prompt text with whitespace normalized (PromptText) and
// the row's agent-task keys (TaskKeys): the same questions imported twice
// get different ids, and agent tasks sharing one instruction differ in
// their files. `rlpipe run` and
// `rlpipe eval` print its warning before they start.
package evaluators
