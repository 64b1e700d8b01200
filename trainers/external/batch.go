package external

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// Mask reasons rlpipe adds to grpo's ("reward status …", "alone in its
// group"); the embedded trainer uses the same words.
const (
	ReasonTrajectory = "trajectory status "
	ReasonNoReward   = "no reward"
	ReasonNoTokens   = "no token ids"
	ReasonZeroStd    = "zero reward variance"
)

// Metrics are the batch's figures, computed by rlpipe from the tables
// before the trainer runs. They are the base of the metrics output: every
// key the trainer's metrics file holds is laid over them, so a trainer
// that writes only its step figures (loss, kl, grad_norm, …) still gets
// the reward and group figures the embedded trainer reports, under the
// same names.
type Metrics struct {
	Iteration int `json:"iteration"`
	// Reward summarises the total reward of the scored samples (reward
	// and trajectory ok); Components each reward component.
	Reward     Summary            `json:"reward"`
	Components map[string]Summary `json:"reward_components,omitempty"`
	// Groups is the number of prompts; ZeroStdGroups those whose scored
	// samples all got the same reward.
	Groups            int     `json:"groups"`
	ZeroStdGroups     int     `json:"zero_std_groups"`
	FracRewardZeroStd float64 `json:"frac_reward_zero_std"`
	// Samples counts trajectories; Used are those the advantages table
	// leaves unmasked (a trainer that skips more overrides it), Errored
	// failed to generate or to be scored, Masked were left out for any
	// reason, MaskReasons counts them by reason.
	Samples     int            `json:"samples"`
	Used        int            `json:"samples_used"`
	Masked      int            `json:"samples_masked"`
	Errored     int            `json:"samples_errored"`
	MaskReasons map[string]int `json:"mask_reasons,omitempty"`
	// Response length (tokens) over the generated samples, the fraction
	// stopped by max_tokens, and the mean policy lag.
	ResponseLengthMean float64 `json:"response_length_mean"`
	ResponseLengthMax  int     `json:"response_length_max"`
	FracLength         float64 `json:"frac_finish_length"`
	StalenessMean      float64 `json:"staleness_mean"`
}

// Summary describes a set of values.
type Summary struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	Std   float64 `json:"std"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
}

type sampleKey struct {
	prompt string
	index  int32
}

// prepare joins an iteration's tables into the advantages table (one row
// per trajectory, in (prompt id, sample index) order) and the batch's
// metrics. A trajectory that failed or has no reward is masked and stays
// out of its group's statistics: it is never trained on as a reward of 0.
func prepare(prompts []tables.Prompt, trajs []tables.Trajectory, rewards []tables.Reward, o advantageOptions) ([]tables.Advantage, Metrics, error) {
	trajs = slices.Clone(trajs)
	slices.SortFunc(trajs, func(x, y tables.Trajectory) int {
		return cmp.Or(strings.Compare(x.PromptID, y.PromptID), cmp.Compare(x.SampleIndex, y.SampleIndex))
	})
	at := make(map[sampleKey]int, len(trajs))
	for i, t := range trajs {
		k := sampleKey{t.PromptID, t.SampleIndex}
		if _, dup := at[k]; dup {
			return nil, Metrics{}, fmt.Errorf("%w: trajectories hold sample %d of prompt %q twice", ErrBatch, t.SampleIndex, t.PromptID)
		}
		at[k] = i
	}
	scored := make([]tables.Reward, len(trajs))
	have := make([]bool, len(trajs))
	for _, r := range rewards {
		i, ok := at[sampleKey{r.PromptID, r.SampleIndex}]
		if !ok {
			return nil, Metrics{}, fmt.Errorf("%w: a reward scores sample %d of prompt %q, which the trajectories do not hold", ErrBatch, r.SampleIndex, r.PromptID)
		}
		if have[i] {
			return nil, Metrics{}, fmt.Errorf("%w: rewards score sample %d of prompt %q twice", ErrBatch, r.SampleIndex, r.PromptID)
		}
		scored[i], have[i] = r, true
	}
	for i, t := range trajs {
		switch {
		case !have[i]:
			scored[i] = tables.Reward{PromptID: t.PromptID, SampleIndex: t.SampleIndex, Status: "missing", Total: math.NaN()}
		case t.Status != tables.StatusOK:
			scored[i].Status = "trajectory " + t.Status
		}
	}
	known := make(map[string]bool, len(prompts))
	for _, p := range prompts {
		known[p.PromptID] = true
	}
	adv, st := grpo.Advantages(scored, grpo.Options{NoStd: o.NoStd})
	for i, t := range trajs {
		a := &adv[i]
		switch {
		case !have[i]:
			a.Reason = ReasonNoReward
		case t.Status != tables.StatusOK:
			a.Reason = ReasonTrajectory + t.Status
		}
		if a.Mask {
			continue
		}
		switch {
		case a.GroupStd == 0 && !o.KeepZeroStd:
			a.Mask, a.Reason, a.Advantage = true, ReasonZeroStd, 0
		case len(t.TokenIDs) == 0:
			a.Mask, a.Reason, a.Advantage = true, ReasonNoTokens, 0
		case !known[t.PromptID]:
			return nil, Metrics{}, fmt.Errorf("%w: sample %d of prompt %q has no row in the prompts table", ErrBatch, t.SampleIndex, t.PromptID)
		}
	}
	return adv, batchMetrics(trajs, scored, adv, st), nil
}

func batchMetrics(trajs []tables.Trajectory, scored []tables.Reward, adv []tables.Advantage, st grpo.Stats) Metrics {
	m := Metrics{Groups: st.Groups, ZeroStdGroups: st.ZeroStd, Samples: len(trajs)}
	if m.Groups > 0 {
		m.FracRewardZeroStd = float64(m.ZeroStdGroups) / float64(m.Groups)
	}
	var totals []float64
	comps := map[string][]float64{}
	var lengths, stale float64
	generated, length := 0, 0
	for i, t := range trajs {
		a, r := adv[i], scored[i]
		if a.Mask {
			m.Masked++
			if m.MaskReasons == nil {
				m.MaskReasons = map[string]int{}
			}
			m.MaskReasons[a.Reason]++
		} else {
			m.Used++
		}
		if r.Status != tables.StatusOK || math.IsNaN(r.Total) {
			m.Errored++
		} else {
			totals = append(totals, r.Total)
			for name, v := range r.Components {
				if !math.IsNaN(v) {
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
		m.ResponseLengthMax = max(m.ResponseLengthMax, n)
		stale += float64(t.Staleness)
		if t.FinishReason == policy.FinishLength {
			length++
		}
	}
	m.Reward = summarize(totals)
	if len(comps) > 0 {
		m.Components = map[string]Summary{}
		names := make([]string, 0, len(comps))
		for n := range comps {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			m.Components[n] = summarize(comps[n])
		}
	}
	if generated > 0 {
		g := float64(generated)
		m.ResponseLengthMean, m.FracLength, m.StalenessMean = lengths/g, float64(length)/g, stale/g
	}
	return m
}

func summarize(v []float64) Summary {
	s := Summary{Count: len(v)}
	if len(v) == 0 {
		return s
	}
	s.Min, s.Max = v[0], v[0]
	for _, x := range v {
		s.Mean += x
		s.Min, s.Max = math.Min(s.Min, x), math.Max(s.Max, x)
	}
	s.Mean /= float64(len(v))
	for _, x := range v {
		s.Std += (x - s.Mean) * (x - s.Mean)
	}
	s.Std = math.Sqrt(s.Std / float64(len(v)))
	return s
}
