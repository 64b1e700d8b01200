package advantages

// GRPO is the group-relative advantage (Shao et al., 2024), the
// default estimator:
//
//	A_i = (r_i − mean(r)) / (std(r) + ε)        (Options.NoStd: r_i − mean(r))
//
// std is the group's sample std unless Options.PopulationStd. With NoStd
// the advantage is Dr. GRPO's, which is Dr. GRPO only with its loss
// normaliser (the seq_mean_token_sum_norm aggregation).
var GRPO Estimator = grpo{}

type grpo struct{}

func (grpo) Name() string { return "grpo" }

func (grpo) Group(rewards []float64, mean, std float64, o Options) []float64 {
	out := make([]float64, len(rewards))
	for i, r := range rewards {
		out[i] = r - mean
		if !o.NoStd {
			out[i] /= std + o.Epsilon
		}
	}
	return out
}
