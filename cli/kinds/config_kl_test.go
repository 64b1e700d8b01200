package kinds_test

import (
	"strings"
	"testing"
)

// TestTrainerKLEntropy: trainer.kl_estimator and trainer.entropy_coeff
// (kind grpo) and the same hyperparameters of kind external. k3 by any
// name keeps the default's train version, k1 or a bonus changes it; an
// unknown estimator, a negative or non-finite coefficient fails the plan
// at its key's line and column, in both trainers.
func TestTrainerKLEntropy(t *testing.T) {
	def := mustTrainVersion(t, grpoBase(""))
	const estimators = "use k1, k2 or k3 (verl's kl, mse or low_var_kl)"
	for _, tc := range []struct {
		name, src string
		same      bool // the default's version
		err       string
	}{
		{name: "k3 is the default", src: grpoBase("trainer: {kl_estimator: k3, beta: 0}\n"), same: true},
		{name: "low_var_kl is k3", src: grpoBase("trainer: {kl_estimator: low_var_kl}\n"), same: true},
		{name: "k1", src: grpoBase("trainer: {beta: 0.04, kl_estimator: k1}\n")},
		{name: "mse", src: grpoBase("trainer: {beta: 0.04, kl_estimator: mse}\n")},
		{name: "an entropy bonus", src: grpoBase("trainer: {entropy_coeff: 0.01}\n")},
		{name: "an unknown estimator", src: grpoBase("trainer: {beta: 0.04, kl_estimator: k4}\n"),
			err: `pipeline.yaml:15:23: trainer.kl_estimator: "k4"; ` + estimators},
		{name: "a negative entropy coefficient", src: grpoBase("trainer: {entropy_coeff: -0.01}\n"),
			err: `pipeline.yaml:15:11: trainer.entropy_coeff: -0.01; it must be ≥ 0 (0 is off; 0.001–0.01 is typical)`},
		{name: "a NaN entropy coefficient", src: grpoBase("trainer: {entropy_coeff: .nan}\n"),
			err: `pipeline.yaml:15:26: trainer.entropy_coeff: expected a finite number, got .nan (no key takes an infinity or NaN; a float is at most about 1.8e308)`},
		{name: "external k1 and a bonus", src: externalBase("{kl_estimator: kl, entropy_coeff: 0.01}")},
		{name: "external: an unknown estimator", src: externalBase("{kl_estimator: k4}"),
			err: `pipeline.yaml:13:59: stages.train.hyperparameters.kl_estimator: k4; ` + estimators},
		{name: "external: an estimator that is not a name", src: externalBase("{kl_estimator: 3}"),
			err: `pipeline.yaml:13:59: stages.train.hyperparameters.kl_estimator: 3; ` + estimators},
		{name: "external: a negative entropy coefficient", src: externalBase("{entropy_coeff: -1}"),
			err: `pipeline.yaml:13:59: stages.train.hyperparameters.entropy_coeff: -1; it must be a number ≥ 0 (0 is off; 0.001–0.01 is typical)`},
		{name: "external: an infinite entropy coefficient", src: externalBase("{entropy_coeff: .inf}"),
			err: `pipeline.yaml:13:59: stages.train.hyperparameters.entropy_coeff: +Inf; it must be a number ≥ 0 (0 is off; 0.001–0.01 is typical)`},
		{name: "external: an entropy coefficient that is not a number", src: externalBase("{entropy_coeff: high}"),
			err: `pipeline.yaml:13:59: stages.train.hyperparameters.entropy_coeff: high; it must be a number ≥ 0 (0 is off; 0.001–0.01 is typical)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := trainVersion(t, tc.src)
			if got := errString(err); got != tc.err {
				t.Fatalf("error %q\nwant  %q", got, tc.err)
			}
			if tc.err == "" && !strings.Contains(tc.src, "external") && (v == def) != tc.same {
				t.Errorf("version %q, default's %q: same %t, want %t", v, def, v == def, tc.same)
			}
		})
	}
}
