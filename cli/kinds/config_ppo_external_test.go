package kinds_test

import (
	"testing"
)

// TestExternalCriticPlan: PPO with the external trainer is checked when
// the run is planned, each error at its key's line and column: gae needs
// hyperparameters.critic, the critic and kl_in_reward need gae, GAE's γ
// and λ belong to the advantages section, and critic.missing is refuse
// or fresh. The critic with gae changes the train version, and so do γ
// and λ; without the critic neither enters it.
func TestExternalCriticPlan(t *testing.T) {
	external := func(hp, adv string) string { return externalBase(hp) + adv }
	plain := mustTrainVersion(t, external("{lr: 1.0e-5}", ""))
	ppo := mustTrainVersion(t, external("{lr: 1.0e-5, critic: {lr: 1.0e-4}}", "advantages: {estimator: gae}\n"))
	discounted := mustTrainVersion(t, external("{lr: 1.0e-5, critic: {lr: 1.0e-4}}", "advantages: {estimator: gae, gamma: 0.99}\n"))
	if ppo == plain || discounted == ppo {
		t.Errorf("train versions: GRPO %s, PPO %s, PPO with gamma 0.99 %s: want three", plain, ppo, discounted)
	}
	for _, tc := range []struct {
		name, src, err string
	}{
		{"gae without a critic", external("{lr: 1.0e-5}", "advantages: {estimator: gae}\n"),
			"pipeline.yaml:14:14: advantages.estimator: gae is PPO's estimator and needs a critic, but stages.train.hyperparameters.critic is not set (add a critic to the external trainer, e.g. hyperparameters: {critic: {lr: 1.0e-5}})"},
		{"a critic without gae", external("{critic: {lr: 1.0e-4}}", ""),
			"pipeline.yaml:13:59: stages.train.hyperparameters.critic: the critic trains with PPO's estimator gae only, and advantages.estimator is grpo (set advantages: {estimator: gae}, or remove the critic)"},
		{"kl_in_reward without gae", external("{kl_in_reward: true, beta: 0.01}", "advantages: {estimator: rloo}\n"),
			"pipeline.yaml:13:59: stages.train.hyperparameters.kl_in_reward: the KL enters PPO's per-token rewards only, and advantages.estimator is rloo (set advantages: {estimator: gae}, or keep the KL in the loss with beta alone)"},
		{"gamma under the critic", external("{critic: {lr: 1.0e-4, gamma: 0.9}}", "advantages: {estimator: gae}\n"),
			"pipeline.yaml:13:59: stages.train.hyperparameters.critic.gamma: GAE's gamma is the advantages section's (advantages.gamma) (set advantages: {estimator: gae, gamma: …} instead; rlpipe writes it here for the trainer)"},
		{"an unknown missing", external("{critic: {missing: rebuild}}", "advantages: {estimator: gae}\n"),
			"pipeline.yaml:13:59: stages.train.hyperparameters.critic.missing: rebuild; use refuse or fresh (refuse (the default) fails a later iteration whose policy has no critic/; fresh starts a new critic)"},
		{"a critic that is not a mapping", external("{critic: 3}", "advantages: {estimator: gae}\n"),
			"pipeline.yaml:13:59: stages.train.hyperparameters.critic: 3 must be a mapping {lr, warmup, cliprange_value, missing} (e.g. critic: {lr: 1.0e-5, warmup: 1})"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := trainVersion(t, tc.src)
			if got := errString(err); got != tc.err {
				t.Fatalf("error %q, want %q", got, tc.err)
			}
		})
	}
}
