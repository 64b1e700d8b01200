package grpo

import (
	"cmp"
	"maps"
	"math"
	"slices"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// Summary describes a set of values.
type Summary struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	Std   float64 `json:"std"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
}

// Summarize is the count, mean, population standard deviation, minimum
// and maximum of v (zeros for none).
func Summarize(v []float64) Summary {
	s := Summary{Count: len(v)}
	if len(v) == 0 {
		return s
	}
	s.Min, s.Max = v[0], v[0]
	for _, x := range v {
		s.Min, s.Max = math.Min(s.Min, x), math.Max(s.Max, x)
	}
	s.Mean, s.Std = advantages.MeanStd(v)
	return s
}

// Figures are a batch's figures before any training step: what every
// trainer reports beside its own loss and KL, under the same names.
type Figures struct {
	// Reward summarises the total reward of the scored samples (reward
	// and trajectory ok); Components each reward component.
	Reward     Summary            `json:"reward"`
	Components map[string]Summary `json:"reward_components,omitempty"`
	// Groups is the number of prompts; ZeroStdGroups those with two or
	// more scored samples that all got the same reward, and
	// FracRewardZeroStd their share of the groups with two or more: nil
	// (null) when there is none, as under n: 1, where a group of one has
	// no spread to be zero.
	Groups            int      `json:"groups"`
	ZeroStdGroups     int      `json:"zero_std_groups"`
	FracRewardZeroStd *float64 `json:"frac_reward_zero_std"`
	// Samples counts trajectories; Used are those trained on, Errored
	// failed to generate or to be scored, Masked were left out for any
	// reason (Errored included), MaskReasons counts them by reason.
	Samples     int            `json:"samples"`
	Used        int            `json:"samples_used"`
	Masked      int            `json:"samples_masked"`
	Errored     int            `json:"samples_errored"`
	MaskReasons map[string]int `json:"mask_reasons,omitempty"`
	// Response length (tokens) over the generated samples, the fraction
	// stopped by max_tokens (finish reason "length"), and the mean policy
	// lag.
	ResponseLengthMean float64 `json:"response_length_mean"`
	ResponseLengthMax  int     `json:"response_length_max"`
	FracLength         float64 `json:"frac_finish_length"`
	StalenessMean      float64 `json:"staleness_mean"`
}

// BatchFigures computes a batch's Figures from its trajectories and, row
// for row, their rewards and advantages; st are the advantages' group
// statistics. Used counts the unmasked rows.
func BatchFigures(trajs []tables.Trajectory, scored []tables.Reward, adv []tables.Advantage, st advantages.Stats) Figures {
	f := Figures{Groups: st.Groups, ZeroStdGroups: st.ZeroStd, Samples: len(trajs)}
	if st.MultiSample > 0 {
		frac := float64(f.ZeroStdGroups) / float64(st.MultiSample)
		f.FracRewardZeroStd = &frac
	}
	var totals []float64
	comps := map[string][]float64{}
	var lengths, stale float64
	generated, length := 0, 0
	for i, t := range trajs {
		a, r := adv[i], scored[i]
		if a.Mask {
			f.Masked++
			if f.MaskReasons == nil {
				f.MaskReasons = map[string]int{}
			}
			f.MaskReasons[a.Reason]++
		} else {
			f.Used++
		}
		if !r.Scored() {
			f.Errored++
		} else {
			totals = append(totals, r.Total)
			for name, v := range r.Components {
				if tables.Finite(v) {
					comps[name] = append(comps[name], v)
				}
			}
		}
		if t.Status != tables.StatusOK {
			continue
		}
		generated++
		n := int(t.NumTokens)
		lengths += float64(n)
		f.ResponseLengthMax = max(f.ResponseLengthMax, n)
		stale += float64(t.Staleness)
		if t.FinishReason == "length" {
			length++
		}
	}
	f.Reward = Summarize(totals)
	if len(comps) > 0 {
		f.Components = map[string]Summary{}
		names := slices.Sorted(maps.Keys(comps))
		for _, n := range names {
			f.Components[n] = Summarize(comps[n])
		}
	}
	if generated > 0 {
		g := float64(generated)
		f.ResponseLengthMean, f.FracLength, f.StalenessMean = lengths/g, float64(length)/g, stale/g
	}
	return f
}

// OffPolicy are an update's train/inference mismatch figures, under the
// names every trainer writes them: how far the trainer's policy is, before
// its first step, from the logprobs the sampler recorded (its numerics,
// and with overlap the updates since the sampling adapter).
type OffPolicy struct {
	// MismatchKL is the mean k3 estimate ρ − 1 − log ρ of
	// KL(π_behaviour ‖ π_trainer) over the trainable tokens, each taken
	// at the first step that trains it (the update's first epoch): with
	// one minibatch, exactly the trainer's policy before the update.
	MismatchKL float64 `json:"mismatch_kl"`
	// RatioMax is the largest ratio ρ = π/π_behaviour any step saw.
	RatioMax float64 `json:"ratio_max"`
}

// MismatchOf is the OffPolicy figures of an update's steps, firstEpoch of
// which make up its first epoch (zeros without steps).
func MismatchOf(steps []LossStats, firstEpoch int) OffPolicy {
	var o OffPolicy
	var kl, n float64
	for i, s := range steps {
		o.RatioMax = math.Max(o.RatioMax, s.RatioMax)
		if i < firstEpoch {
			// Scored: the rejection's dropped tokens count in BehaviourKL.
			k := float64(cmp.Or(s.Scored, s.Tokens))
			kl += s.BehaviourKL * k
			n += k
		}
	}
	if n > 0 {
		o.MismatchKL = kl / n
	}
	return o
}
