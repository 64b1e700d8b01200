package advantages

// DrGRPO is the advantage of Dr. GRPO (Liu et al., 2025, "Understanding
// R1-Zero-like training"): the group's mean subtracted, no division by
// the standard deviation,
//
//	A_i = r_i − mean(r)
//
// whatever Options.NoStd and Options.PopulationStd say. It is Dr. GRPO
// only with its other half, the loss summed over tokens and divided by a
// constant (G · L_max) instead of each sequence's length (the trainers'
// aggregation seq_mean_token_sum_norm), which belongs to the loss, not
// to the estimator: with this estimator a trainer still aggregates as it
// is configured to.
var DrGRPO Estimator = drGRPO{}

type drGRPO struct{}

func (drGRPO) Name() string { return "dr_grpo" }

// Group is GRPO's without the division, whatever o says.
func (drGRPO) Group(rewards []float64, mean, std float64, o Options) []float64 {
	o.NoStd = true
	return GRPO.Group(rewards, mean, std, o)
}
