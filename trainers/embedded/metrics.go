package embedded

import "github.com/rlpipe/rlpipe/trainers/grpo"

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
	// (TrainTokens a sum); all zero when no step was taken. KL is nil
	// (null) when it was not computed: at β = 0, the default.
	grpo.LossFigures
	GradNorm    float64 `json:"grad_norm"`
	TrainTokens int     `json:"train_tokens"`
	// Steps has each optimizer step's figures.
	Steps []StepMetrics `json:"steps"`
	// OffPolicy are mismatch_kl and ratio_max (grpo.MismatchOf): the
	// train/inference mismatch before the update.
	grpo.OffPolicy
	// PPOFigures are PPO's (value_loss, vf_clip_frac, critic_grad_norm,
	// explained_variance, values_mean, returns_mean); left out without
	// the critic.
	*PPOFigures

	// Figures are the batch's: rewards per component, groups, samples
	// used and masked, response lengths, staleness.
	grpo.Figures
}

// StepMetrics describe one optimizer step.
type StepMetrics struct {
	grpo.LossStats
	// GradNorm is the gradient's global L2 norm before clipping.
	GradNorm float64 `json:"grad_norm"`
	// CriticStep is the critic's step on the same minibatch (left out
	// without one). During the critic's warm-up the policy takes no
	// step: its figures are 0.
	*CriticStep
}

// batchMetrics are the figures of a prepared batch, before any step.
func batchMetrics(p *prepared) Metrics {
	return Metrics{Figures: grpo.BatchFigures(p.trajs, p.scored, p.advantages, p.stats), Steps: []StepMetrics{}}
}

// addSteps records the optimizer steps and their means; the first
// firstEpoch steps are the update's first epoch.
func (m *Metrics) addSteps(steps []StepMetrics, firstEpoch int) {
	m.Steps = steps
	if len(steps) == 0 {
		return
	}
	ls := make([]grpo.LossStats, len(steps))
	for i, s := range steps {
		ls[i] = s.LossStats
	}
	m.OffPolicy = grpo.MismatchOf(ls, firstEpoch)
	var kl, dual float64
	for _, s := range steps {
		if s.ClipDual != nil {
			dual += *s.ClipDual
			m.ClipDual = &dual
		}
		m.Loss += s.Loss
		m.PolicyLoss += s.PolicyLoss
		if s.KL != nil {
			kl += *s.KL
			m.KL = &kl
		}
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
	if m.KL != nil {
		kl /= n
	}
	if m.ClipDual != nil {
		dual /= n
	}
	m.Entropy /= n
	m.ClipLow /= n
	m.ClipHigh /= n
	m.RatioDev /= n
	m.GradNorm /= n
}

// addPPO records PPO's figures: the batch's, and the means of the
// critic's steps.
func (m *Metrics) addPPO(steps []StepMetrics, f PPOFigures) {
	n := 0
	for _, s := range steps {
		if s.CriticStep == nil {
			continue
		}
		f.ValueLoss += s.ValueLoss
		f.VFClipFrac += s.VFClipFrac
		f.CriticGradNorm += s.CriticGradNorm
		n++
	}
	if n > 0 {
		f.ValueLoss /= float64(n)
		f.VFClipFrac /= float64(n)
		f.CriticGradNorm /= float64(n)
	}
	m.PPOFigures = &f
}
