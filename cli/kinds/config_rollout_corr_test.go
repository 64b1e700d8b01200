package kinds_test

import (
	"strings"
	"testing"
)

// TestTrainerRolloutCorrection: the grpo stage's rollout_is and rollout_rs
// keys (verl's names) change the train version only when set; a bad
// value is a plan error at its key's line and column, saying what to do.
// The external trainer's hyperparameters are checked the same way.
func TestTrainerRolloutCorrection(t *testing.T) {
	def := mustTrainVersion(t, grpoBase(""))
	for _, tc := range []struct {
		name, src string
		err       string
	}{
		{name: "token TIS", src: grpoBase("trainer: {rollout_is: token}\n")},
		{name: "verl's bypass_pg_is: reinforce with token TIS", src: grpoBase("trainer: {loss: reinforce, rollout_is: token}\n")},
		{name: "dual clip with reinforce", src: grpoBase("trainer: {loss: reinforce, dual_clip: 3}\n"),
			err: `pipeline.yaml:15:28: trainer.dual_clip: 3; dual clip applies to loss ppo_clip only, not reinforce (remove dual_clip or the loss)`},
		{name: "sequence TIS, cap 3, geometric mask", src: grpoBase("trainer: {rollout_is: sequence, rollout_is_threshold: 3, rollout_rs: seq_mean_k1, rollout_rs_threshold: 1.5, rollout_rs_threshold_lower: 0.8}\n")},
		{name: "an unknown level", src: grpoBase("trainer: {rollout_is: seq}\n"),
			err: `pipeline.yaml:15:11: trainer.rollout_is: "seq"; use token or sequence (verl's rollout_is levels)`},
		{name: "a negative cap", src: grpoBase("trainer: {rollout_is: token, rollout_is_threshold: -2}\n"),
			err: `pipeline.yaml:15:30: trainer.rollout_is_threshold: -2; it must be positive (2 is verl's default)`},
		{name: "an unknown statistic", src: grpoBase("trainer: {rollout_rs: geometric, rollout_rs_threshold: 2}\n"),
			err: `pipeline.yaml:15:11: trainer.rollout_rs: "geometric"; use one of token_k1, token_k2, token_k3, seq_sum_k1, seq_sum_k2, seq_sum_k3, seq_mean_k1, seq_mean_k2, seq_mean_k3, seq_max_k2, seq_max_k3 (verl's rollout_rs names)`},
		{name: "a statistic without its threshold", src: grpoBase("trainer: {rollout_rs: token_k1}\n"),
			err: `pipeline.yaml:15:11: trainer.rollout_rs: token_k1 needs rollout_rs_threshold (e.g. 2 for a k1 statistic: ratios in [1/2, 2])`},
		{name: "a lower bound for k3", src: grpoBase("trainer: {rollout_rs: token_k3, rollout_rs_threshold: 0.1, rollout_rs_threshold_lower: 0.01}\n"),
			err: `pipeline.yaml:15:60: trainer.rollout_rs_threshold_lower: 0.01; only the k1 statistics have a lower bound, not token_k3`},
		{name: "external: token TIS and token_k1", src: externalBase("{rollout_is: token, rollout_rs: token_k1, rollout_rs_threshold: 2}")},
		{name: "external: an unknown statistic", src: externalBase("{rollout_rs: token_k9, rollout_rs_threshold: 2}"),
			err: `pipeline.yaml:13:59: stages.train.hyperparameters.rollout_rs: "token_k9"; use one of token_k1, token_k2, token_k3, seq_sum_k1, seq_sum_k2, seq_sum_k3, seq_mean_k1, seq_mean_k2, seq_mean_k3, seq_max_k2, seq_max_k3 (verl's rollout_rs names)`},
		{name: "external: a threshold that is no number", src: externalBase("{rollout_is: token, rollout_is_threshold: two}"),
			err: `pipeline.yaml:13:78: stages.train.hyperparameters.rollout_is_threshold: two is not a number`},
		{name: "external: an integer threshold", src: externalBase("{rollout_rs: seq_max_k3, rollout_rs_threshold: 1, rollout_rs_threshold_lower: 1}"),
			err: `pipeline.yaml:13:108: stages.train.hyperparameters.rollout_rs_threshold_lower: 1; only the k1 statistics have a lower bound, not seq_max_k3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := trainVersion(t, tc.src)
			if got := errString(err); got != tc.err {
				t.Fatalf("error %q, want %q", got, tc.err)
			}
			if tc.err == "" && v == def {
				t.Errorf("version %q is the default's: the option does not enter it", v)
			}
		})
	}
}

// externalBase is the base file with an external train stage of the
// hyperparameters hp (a YAML flow mapping).
func externalBase(hp string) string {
	return strings.Replace(base, "train: {kind: standin, sleep: 1s}", "train: {kind: external, command: [t], hyperparameters: "+hp+"}", 1)
}
