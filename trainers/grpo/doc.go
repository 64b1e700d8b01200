// Package grpo holds the model-free part of a group-relative policy
// optimisation step, the part both trainers share once the advantages are
// known (package advantages computes them from the rewards).
//
// Loss is the objective of a batch of Sequences, each a sampled
// completion with its current, old and (for the KL term) reference
// log-probabilities and its advantage: per token a policy term ℓ_π, a
// KL estimate to the reference and an optional entropy bonus,
//
//	ℓ = ℓ_π + β·k(δ) − c_H·H,  δ = logπ_ref − logπ
//
// where k is a KLEstimator (k3 = exp(δ) − δ − 1, the default; k1 = −δ;
// k2 = ½δ², verl's kl_penalty) and H the policy's entropy at the token,
// aggregated over tokens (TokenMean, DAPO), sequences (SequenceMean, the
// original GRPO) or sequence sums over a constant (SeqMeanTokenSumNorm,
// Dr. GRPO). The policy term is a PolicyLoss, a registry value like
// advantages.Estimator: PPOClip, the clipped surrogate
// −min(ρ·A, clip(ρ, 1−ε_low, 1+ε_high)·A) and the default; GSPO, the same
// with one ratio per sequence; CISPO, REINFORCE weighted by the clipped
// ratio under a stop-gradient. Each is one file and runs the shared
// suite in trainers/grpo/losstest. Loss returns the loss, its gradient
// with respect to each token's log-probability — what a model's backward
// pass starts from — and the step's LossStats; Gradient also returns the
// gradient with respect to each token's entropy, which the entropy bonus
// needs (a model's backward pass takes it through ∂H/∂z_k =
// −p_k·(log p_k + H) to its logits z). LossStats hold the KL, entropy,
// clip fractions and ratio deviation. A loss or ratio that is not finite fails
// with ErrNonFinite, so the step is not applied.
//
// BatchFigures computes the figures every trainer reports about a batch
// before any step (reward summaries per component, groups, samples used
// and masked by reason, response lengths, staleness), under the same JSON
// names whichever trainer wrote them.
//
// Both trainers' train tasks share their shape: the names of the outputs
// and files (OutAdapter, MetricsFile, …), Params, Outputs, and ReadBatch,
// which reads a call's prompts, trajectories, rewards and the optional
// advantages input into a Batch.
package grpo
