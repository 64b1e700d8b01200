package advantages

import "math"

// ReinforcePPBaseline is REINFORCE++ with a group baseline (Hu et al.,
// 2025, the "-baseline" variant for outcome rewards): each group's mean
// is subtracted, then the whole batch is whitened,
//
//	s_i = r_i − mean_g(r)
//	A_i = (s_i − mean_B(s)) / sqrt(var_B(s) + 1e-8)
//
// over the batch B of samples Compute gives an advantage (scored, not
// alone), var_B with Bessel's correction. It is a BatchEstimator: the
// batch step needs every group. The 1e-8 is verl's (masked_whiten), not
// Options.Epsilon. One difference from verl's
// compute_reinforce_plus_plus_baseline_outcome_advantage, a design
// choice: verl whitens over the batch's response tokens (a sample
// weighs as many tokens as it has), this over samples (each weighs one),
// so that the advantages depend on the rewards alone, as every other
// estimator's; the two agree when each response is one token.
var ReinforcePPBaseline Estimator = reinforcePP{}

// whitenEpsilon is added to the batch variance before its square root.
const whitenEpsilon = 1e-8

type reinforcePP struct{}

func (reinforcePP) Name() string { return "reinforce_plus_plus_baseline" }

// Group is Dr. GRPO's: the group's mean subtracted, no std.
func (reinforcePP) Group(rewards []float64, mean, std float64, o Options) []float64 {
	return DrGRPO.Group(rewards, mean, std, o)
}

func (reinforcePP) Batch(adv []float64, _ Options) []float64 {
	out := make([]float64, len(adv))
	if len(adv) < 2 {
		return out
	}
	mean, v := MeanStd(adv)
	n := float64(len(adv))
	scale := 1 / math.Sqrt(v*v*n/(n-1)+whitenEpsilon)
	for i, a := range adv {
		out[i] = (a - mean) * scale
	}
	return out
}
