package external

import (
	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/pipeline/kind"
)

// checkCritic checks PPO's keys against the advantages section when the
// run is planned: the gae estimator needs hyperparameters.critic, the
// critic and kl_in_reward need gae, and the critic's keys rlpipe acts on
// are well formed. gamma and lambda belong to the advantages section,
// which rlpipe writes into the critic's keys for the trainer.
func (s *Stage) checkCritic(c kind.Checker) {
	est := c.File().Estimator
	gae := advantages.NeedsCritic(est)
	name := advantages.GRPO.Name()
	if est != nil {
		name = est.Name()
	}
	v, has := s.Hyperparameters[Critic]
	has = has && v != nil
	const key = "hyperparameters." + Critic
	switch {
	case gae && !has:
		c.Fail("/advantages.estimator", "add a critic to the external trainer, e.g. hyperparameters: {critic: {lr: 1.0e-5}}",
			"%s: gae is PPO's estimator and needs a critic, but %s is not set", c.Path("/advantages.estimator"), c.Path(key))
		return
	case has && !gae:
		c.Fail(key, "set advantages: {estimator: gae}, or remove the critic",
			"%s: the critic trains with PPO's estimator gae only, and advantages.estimator is %s", c.Path(key), name)
		return
	case s.Hyperparameters[KLInReward] == true && !gae:
		c.Fail("hyperparameters."+KLInReward, "set advantages: {estimator: gae}, or keep the KL in the loss with beta alone",
			"%s: the KL enters PPO's per-token rewards only, and advantages.estimator is %s", c.Path("hyperparameters."+KLInReward), name)
		return
	case !has:
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		c.Fail(key, "e.g. critic: {lr: 1.0e-5, warmup: 1}", "%s: %v must be a mapping {lr, warmup, cliprange_value, missing}", c.Path(key), v)
		return
	}
	for _, k := range []string{"gamma", "lambda"} {
		if _, set := m[k]; set {
			c.Fail(key+"."+k, "set advantages: {estimator: gae, "+k+": …} instead; rlpipe writes it here for the trainer",
				"%s: GAE's %s is the advantages section's (advantages.%s)", c.Path(key+"."+k), k, k)
		}
	}
	if x, set := m[CriticMissing]; set && x != MissingRefuse && x != MissingFresh {
		c.Fail(key+"."+CriticMissing, "refuse (the default) fails a later iteration whose policy has no critic/; fresh starts a new critic",
			"%s: %v; use %s or %s", c.Path(key+"."+CriticMissing), x, MissingRefuse, MissingFresh)
	}
}
