package embedded

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/pipeline/kind"
)

// CriticOptions configure PPO's critic (Options.Critic): a second LoRA
// adapter of the adapter's shape plus a value head on the same frozen
// base, trained by its own AdamW on the value loss.
type CriticOptions struct {
	// LR is the critic's AdamW learning rate (default: the trainer's
	// lr). Betas, ε, weight decay and gradient clipping are the
	// trainer's.
	LR float64 `yaml:"lr,omitempty" json:"lr"`
	// Warmup is how many of the critic's first updates train it alone:
	// the policy's adapter and optimizer come out of them unchanged
	// (default 0).
	Warmup int `yaml:"warmup,omitempty" json:"warmup,omitempty"`
	// ClipRangeValue bounds how far the value loss lets a new value move
	// from the old one, ±ClipRangeValue (default 0.5, verl's
	// cliprange_value).
	ClipRangeValue float64 `yaml:"cliprange_value,omitempty" json:"cliprange_value"`
	// Missing says what a later iteration does when its policy input has
	// no critic/ directory: MissingRefuse (default) fails the call naming
	// the adapter, MissingFresh starts a new critic and logs it.
	Missing string `yaml:"missing,omitempty" json:"missing"`
}

// Values of CriticOptions.Missing.
const (
	MissingRefuse = "refuse"
	MissingFresh  = "fresh"
)

// DefaultClipRangeValue is CriticOptions.ClipRangeValue's default.
const DefaultClipRangeValue = 0.5

// GAEOptions are PPO's estimator's: the discount γ and GAE's λ (verl's
// defaults are 1 and 1).
type GAEOptions struct {
	Gamma  float64 `json:"gamma"`
	Lambda float64 `json:"lambda"`
}

func (c *CriticOptions) ensureDefaults(lr float64) {
	if c == nil {
		return
	}
	c.LR = cmp.Or(c.LR, lr)
	c.ClipRangeValue = cmp.Or(c.ClipRangeValue, DefaultClipRangeValue)
	c.Missing = cmp.Or(c.Missing, MissingRefuse)
}

// validatePPO reports the first PPO option that cannot work.
func (o Options) validatePPO() error {
	bad := func(key string, format string, args ...any) error {
		return &OptionError{Key: key, Msg: fmt.Sprintf(format, args...)}
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	if c := o.Critic; c != nil {
		switch {
		case !(c.LR > 0) || !finite(c.LR):
			return bad("critic.lr", "%g; it must be positive (try 1e-3)", c.LR)
		case !(c.ClipRangeValue > 0) || !finite(c.ClipRangeValue):
			return bad("critic.cliprange_value", "%g; it must be positive (verl's default is 0.5)", c.ClipRangeValue)
		case c.Warmup < 0:
			return bad("critic.warmup", "%d; it must be ≥ 0", c.Warmup)
		case !slices.Contains([]string{MissingRefuse, MissingFresh}, c.Missing):
			return bad("critic.missing", "%q; use %s or %s", c.Missing, MissingRefuse, MissingFresh)
		}
	}
	switch {
	case o.GAE != nil && o.Critic == nil:
		return bad("critic", "missing; PPO's estimator gae needs a critic: set trainer.critic, e.g. {lr: 1e-3}")
	case o.Critic != nil && o.GAE == nil:
		return bad("critic", "the critic trains with PPO's estimator only: set advantages: {estimator: gae}, or remove trainer.critic")
	case o.KLInReward && o.GAE == nil:
		return bad("kl_in_reward", "true; the KL enters PPO's per-token rewards only: set advantages: {estimator: gae}, or keep the KL in the loss with beta alone")
	case o.KLInReward && o.Beta == 0:
		return bad("kl_in_reward", "true but beta is 0, which weighs the KL; set trainer.beta, e.g. 0.01")
	case o.GAE != nil && !(o.GAE.Gamma >= 0 && o.GAE.Gamma <= 1 && o.GAE.Lambda >= 0 && o.GAE.Lambda <= 1):
		return bad("gae", "gamma %g and lambda %g must be in [0, 1]", o.GAE.Gamma, o.GAE.Lambda)
	}
	return nil
}

// checkPPO checks that the advantages section's estimator and the
// critic go together (gae needs trainer.critic; trainer.critic and
// trainer.kl_in_reward need gae), failing at the key that is set, and
// sets o.GAE from the section. It reports whether the check may go on.
func checkPPO(c kind.Checker, o *Options) bool {
	est := c.File().Estimator
	o.GAE = gaeOptions(est, 1, 1) // the advantages section checks gamma and lambda
	name := advantages.GRPO.Name()
	if est != nil {
		name = est.Name()
	}
	switch {
	case o.GAE != nil && o.Critic == nil:
		c.Fail("/advantages.estimator", "add a critic to the trainer section, e.g. trainer: {critic: {lr: 1e-3}}",
			"%s: gae is PPO's estimator and needs a critic, but %s is not set", c.Path("/advantages.estimator"), c.Path("/trainer.critic"))
	case o.Critic != nil && o.GAE == nil:
		c.Fail("/trainer.critic", "set advantages: {estimator: gae}, or remove the critic",
			"%s: the critic trains with PPO's estimator gae only, and advantages.estimator is %s", c.Path("/trainer.critic"), name)
	case o.KLInReward && o.GAE == nil:
		c.Fail("/trainer.kl_in_reward", "set advantages: {estimator: gae}, or keep the KL in the loss with beta alone",
			"%s: the KL enters PPO's per-token rewards only, and advantages.estimator is %s", c.Path("/trainer.kl_in_reward"), name)
	default:
		return true
	}
	return false
}

// gaeOptions are PPO's estimator's options when e needs a critic (gae),
// else nil.
func gaeOptions(e advantages.Estimator, gamma, lambda float64) *GAEOptions {
	if !advantages.NeedsCritic(e) {
		return nil
	}
	return &GAEOptions{Gamma: gamma, Lambda: lambda}
}
