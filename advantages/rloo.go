package advantages

// RLOO is REINFORCE with a leave-one-out baseline (Ahmadian et al.,
// 2024): each sample's baseline is the mean reward of the other samples
// of its group,
//
//	A_i = r_i − mean_{j≠i} r_j = G/(G−1) · (r_i − mean(r))
//
// for a group of G ≥ 2 scored samples. It divides by no standard
// deviation, so Options.NoStd and Options.PopulationStd change nothing.
// A run whose groups hold one sample cannot use it (MinGroup).
var RLOO Estimator = rloo{}

type rloo struct{}

func (rloo) Name() string  { return "rloo" }
func (rloo) MinGroup() int { return 2 }

func (rloo) Group(rewards []float64, mean, _ float64, _ Options) []float64 {
	g := float64(len(rewards))
	out := make([]float64, len(rewards))
	for i, r := range rewards {
		out[i] = g / (g - 1) * (r - mean)
	}
	return out
}
