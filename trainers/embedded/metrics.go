package embedded

import (
	"math"
	"sort"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// Metrics are an update's health figures, written as the train stage's
// metrics file. They depend only on the inputs and options — no timings —
// so the file is byte-identical whenever the update is repeated.
type Metrics struct {
	// Iteration is the loop's iteration (the train stage sets it;
	// Trainer.Update leaves it 0).
	Iteration int `json:"iteration"`
	// Updates and OptimizerSteps count what the adapter has been through,
	// this update included.
	Updates        int `json:"updates"`
	OptimizerSteps int `json:"optimizer_steps"`

	// The step figures are means over this update's optimizer steps
	// (TrainTokens a sum); all zero when no step was taken.
	Loss        float64 `json:"loss"`
	PolicyLoss  float64 `json:"policy_loss"`
	KL          float64 `json:"kl"`
	Entropy     float64 `json:"entropy"`
	ClipLow     float64 `json:"clip_frac_low"`
	ClipHigh    float64 `json:"clip_frac_high"`
	RatioDev    float64 `json:"ratio_dev"`
	GradNorm    float64 `json:"grad_norm"`
	TrainTokens int     `json:"train_tokens"`
	// Steps has each optimizer step's figures.
	Steps []StepMetrics `json:"steps"`

	// Reward summarises the total reward of the scored samples (reward
	// and trajectory ok); Components each reward component.
	Reward     Summary            `json:"reward"`
	Components map[string]Summary `json:"reward_components,omitempty"`
	// Groups is the number of prompts; ZeroStdGroups those whose scored
	// samples all got the same reward (FracRewardZeroStd of Groups).
	Groups            int     `json:"groups"`
	ZeroStdGroups     int     `json:"zero_std_groups"`
	FracRewardZeroStd float64 `json:"frac_reward_zero_std"`

	// Samples counts trajectories; Used were trained on, Errored failed to
	// generate or to be scored, Masked were left out for any reason
	// (Errored included), MaskReasons counts them by reason.
	Samples     int            `json:"samples"`
	Used        int            `json:"samples_used"`
	Masked      int            `json:"samples_masked"`
	Errored     int            `json:"samples_errored"`
	MaskReasons map[string]int `json:"mask_reasons,omitempty"`

	// Response length (tokens) over the generated samples, and the
	// fraction of them stopped by max_tokens (finish_reason "length").
	ResponseLengthMean float64 `json:"response_length_mean"`
	ResponseLengthMax  int     `json:"response_length_max"`
	FracLength         float64 `json:"frac_finish_length"`
	// StalenessMean is the mean policy lag of the generated samples.
	StalenessMean float64 `json:"staleness_mean"`
}

// StepMetrics describe one optimizer step.
type StepMetrics struct {
	grpo.LossStats
	// GradNorm is the gradient's global L2 norm before clipping.
	GradNorm float64 `json:"grad_norm"`
}

// Summary describes a set of values.
type Summary struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	Std   float64 `json:"std"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
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

// batchMetrics are the figures of a prepared batch, before any step.
func batchMetrics(p *prepared) Metrics {
	m := Metrics{Groups: p.stats.Groups, ZeroStdGroups: p.stats.ZeroStd, Samples: len(p.trajs), Used: len(p.samples), Steps: []StepMetrics{}}
	if m.Groups > 0 {
		m.FracRewardZeroStd = float64(m.ZeroStdGroups) / float64(m.Groups)
	}
	var totals []float64
	comps := map[string][]float64{}
	var lengths, stale float64
	generated, length := 0, 0
	for i, t := range p.trajs {
		a, r := p.advantages[i], p.scored[i]
		if a.Mask {
			m.Masked++
			if m.MaskReasons == nil {
				m.MaskReasons = map[string]int{}
			}
			m.MaskReasons[a.Reason]++
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

// addSteps records the optimizer steps and their means.
func (m *Metrics) addSteps(steps []StepMetrics) {
	m.Steps = steps
	if len(steps) == 0 {
		return
	}
	for _, s := range steps {
		m.Loss += s.Loss
		m.PolicyLoss += s.PolicyLoss
		m.KL += s.KL
		m.Entropy += s.Entropy
		m.ClipLow += s.ClipLow
		m.ClipHigh += s.ClipHigh
		m.RatioDev += s.RatioDev
		m.GradNorm += s.GradNorm
		m.TrainTokens += s.Tokens
	}
	n := float64(len(steps))
	m.Loss /= n
	m.PolicyLoss /= n
	m.KL /= n
	m.Entropy /= n
	m.ClipLow /= n
	m.ClipHigh /= n
	m.RatioDev /= n
	m.GradNorm /= n
}
