package advantages

import (
	"math"
	"sort"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// Options shape the advantages.
type Options struct {
	// Epsilon is added to the group's standard deviation (default 1e-6).
	Epsilon float64
	// NoStd drops the division by the standard deviation: GRPO's
	// advantage without it is Dr. GRPO's advantage (its loss half is the
	// seq_mean_token_sum_norm aggregation, not an option here).
	NoStd bool
	// PopulationStd divides by the group's population standard deviation
	// (over n) instead of the sample one (Bessel's correction, n − 1, as
	// TRL and verl do, the default since issue 36): the advantages
	// section's std: population, and what every run computed before the
	// default flipped.
	PopulationStd bool
	// Estimator computes each group's advantages; nil is GRPO.
	Estimator Estimator
	// Gamma and Lambda are GAE's discount γ and λ (GAEEstimator; the
	// trainer applies them, per token). Zero for the other estimators;
	// for GAE, verl's defaults are 1 and 1.
	Gamma, Lambda float64
}

// Stats count the groups of a batch.
type Stats struct {
	Groups int `json:"groups"`
	// MultiSample groups have two or more scored samples: a spread of
	// rewards means something only there.
	MultiSample int `json:"multi_sample"`
	// ZeroStd groups are MultiSample groups whose scored samples all got
	// the same reward: they carry no signal (frac_reward_zero_std =
	// ZeroStd / MultiSample, undefined without a MultiSample group). A
	// group of one, as every group under n: 1, is not one of them.
	ZeroStd int `json:"zero_std"`
	// Masked samples are excluded: not scored (a failed rollout, a reward
	// error) or alone in their group.
	Masked int `json:"masked"`
}

// Compute returns the advantages of o's Estimator (GRPO's A_i = (r_i −
// mean(r)) / (std(r) + ε) by default, std the sample std unless
// o.PopulationStd) within each group of samples of one prompt. Samples
// that are not scored (tables.Reward.Scored) are masked
// (ReasonRewardStatus) and do not enter their group's statistics: a
// failed rollout is never trained on as a reward of 0. A sample whose
// group has no other scored sample is masked too (ReasonAlone), except
// under a CriticEstimator (GAE), whose baseline is the critic's value,
// not the group. A BatchEstimator's Batch then rewrites the advantages
// of the unmasked rows together. Rows come back in the input
// order.
func Compute(rows []tables.Reward, o Options) ([]tables.Advantage, Stats) {
	if o.Epsilon == 0 {
		o.Epsilon = 1e-6
	}
	est := o.estimator()
	groups := map[string][]int{}
	var order []string
	for i, r := range rows {
		if _, ok := groups[r.PromptID]; !ok {
			order = append(order, r.PromptID)
		}
		groups[r.PromptID] = append(groups[r.PromptID], i)
	}
	sort.Strings(order)
	out := make([]tables.Advantage, len(rows))
	var st Stats
	for _, pid := range order {
		idx := groups[pid]
		var vals []float64
		for _, i := range idx {
			if rows[i].Scored() {
				vals = append(vals, rows[i].Total)
			}
		}
		mean, std := GroupStats(vals, o)
		var adv []float64
		critic := NeedsCritic(est)
		if len(vals) >= 2 || critic && len(vals) > 0 {
			adv = est.Group(vals, mean, std, o)
		}
		st.Groups++
		if len(vals) >= 2 {
			st.MultiSample++
			if std == 0 {
				st.ZeroStd++
			}
		}
		scored := 0
		for _, i := range idx {
			r := rows[i]
			a := tables.Advantage{PromptID: r.PromptID, SampleIndex: r.SampleIndex, GroupMean: mean, GroupStd: std, GroupSize: int32(len(vals))}
			switch {
			case !r.Scored():
				a.Mask, a.Reason = true, ReasonRewardStatus+r.Outcome()
			case len(vals) < 2 && !critic:
				a.Mask, a.Reason = true, ReasonAlone
			default:
				a.Advantage = adv[scored]
			}
			if r.Scored() {
				scored++
			}
			if a.Mask {
				st.Masked++
			}
			out[i] = a
		}
	}
	if be, ok := est.(BatchEstimator); ok {
		batch(out, be, o)
	}
	return out, st
}

// batch replaces the advantages of out's unmasked rows with what be's
// Batch makes of them, taken in row order.
func batch(out []tables.Advantage, be BatchEstimator, o Options) {
	var idx []int
	var vals []float64
	for i, a := range out {
		if !a.Mask {
			idx, vals = append(idx, i), append(vals, a.Advantage)
		}
	}
	for j, v := range be.Batch(vals, o) {
		out[idx[j]].Advantage = v
	}
}

// GroupStats are the mean and the standard deviation of a group's scored
// rewards r that Compute hands an estimator's Group: the sample std (0
// for fewer than two values), or MeanStd's population std with
// o.PopulationStd.
func GroupStats(r []float64, o Options) (mean, std float64) {
	mean, std = MeanStd(r)
	if !o.PopulationStd {
		std = sampleStd(std, len(r))
	}
	return mean, std
}

// sampleStd is the sample standard deviation of n values whose
// population standard deviation is std: ×√(n/(n−1)), and 0 for fewer
// than two values (no spread to estimate).
func sampleStd(std float64, n int) float64 {
	if n < 2 {
		return 0
	}
	return std * math.Sqrt(float64(n)/float64(n-1))
}

// MeanStd is the mean and population standard deviation of v (zeros for
// none), as the groups' statistics use them.
func MeanStd(v []float64) (float64, float64) {
	m, s2 := tables.MeanVariance(v)
	return m, math.Sqrt(s2)
}
