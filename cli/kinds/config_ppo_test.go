package kinds_test

import (
	"strings"
	"testing"
)

// TestTrainerCritic: advantages estimator gae and trainer.critic go
// together, and kl_in_reward needs gae; each alone is an error at the
// key that is set, as is a critic option that cannot work. The critic's
// options enter the train version only when set.
func TestTrainerCritic(t *testing.T) {
	def := mustTrainVersion(t, grpoBase(""))
	gae := "advantages: {estimator: gae}\n"
	for _, tc := range []struct {
		name, src string
		err       string
	}{
		{name: "gae with a critic", src: grpoBase(gae + "trainer: {critic: {lr: 1.0e-3, warmup: 2}}\n")},
		{name: "gae with a critic and n: 1", src: strings.Replace(grpoBase(gae+"trainer: {critic: {}, kl_in_reward: true, beta: 0.01}\n"), "n: 8", "n: 1", 1)},
		{name: "gae without a critic", src: grpoBase(gae),
			err: "pipeline.yaml:15:14: advantages.estimator: gae is PPO's estimator and needs a critic, but trainer.critic is not set (add a critic to the trainer section, e.g. trainer: {critic: {lr: 1e-3}})"},
		{name: "a critic without gae", src: grpoBase("trainer: {critic: {lr: 1.0e-3}}\n"),
			err: "pipeline.yaml:15:11: trainer.critic: the critic trains with PPO's estimator gae only, and advantages.estimator is grpo (set advantages: {estimator: gae}, or remove the critic)"},
		{name: "a critic with rloo", src: grpoBase("advantages: {estimator: rloo}\ntrainer: {critic: {lr: 1.0e-3}}\n"),
			err: "pipeline.yaml:16:11: trainer.critic: the critic trains with PPO's estimator gae only, and advantages.estimator is rloo (set advantages: {estimator: gae}, or remove the critic)"},
		{name: "kl_in_reward without gae", src: grpoBase("trainer: {kl_in_reward: true, beta: 0.01}\n"),
			err: "pipeline.yaml:15:11: trainer.kl_in_reward: the KL enters PPO's per-token rewards only, and advantages.estimator is grpo (set advantages: {estimator: gae}, or keep the KL in the loss with beta alone)"},
		{name: "kl_in_reward without beta", src: grpoBase(gae + "trainer: {critic: {}, kl_in_reward: true}\n"),
			err: "pipeline.yaml:16:23: trainer.kl_in_reward: true but beta is 0, which weighs the KL; set trainer.beta, e.g. 0.01"},
		{name: "a negative critic lr", src: grpoBase(gae + "trainer: {critic: {lr: -1}}\n"),
			err: "pipeline.yaml:16:20: trainer.critic.lr: -1; it must be positive (try 1e-3)"},
		{name: "a negative cliprange_value", src: grpoBase(gae + "trainer: {critic: {cliprange_value: -0.5}}\n"),
			err: "pipeline.yaml:16:20: trainer.critic.cliprange_value: -0.5; it must be positive (verl's default is 0.5)"},
		{name: "an unknown missing", src: grpoBase(gae + "trainer: {critic: {missing: rebuild}}\n"),
			err: `pipeline.yaml:16:20: trainer.critic.missing: "rebuild"; use refuse or fresh`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := trainVersion(t, tc.src)
			if got := errString(err); got != tc.err {
				t.Fatalf("error %q\nwant  %q", got, tc.err)
			}
			if tc.err == "" && v == def {
				t.Errorf("version %q is the default's: the critic does not enter it", v)
			}
		})
	}
}
