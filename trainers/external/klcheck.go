package external

import (
	"math"

	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// Hyperparameters of the reference script's KL term and entropy bonus,
// which rlpipe checks when the run is planned.
const (
	// KLEstimator is k1, k2 or k3 (default), or verl's kl, mse or
	// low_var_kl.
	KLEstimator = "kl_estimator"
	// EntropyCoeff is the entropy bonus's coefficient, ≥ 0 (0 is off).
	EntropyCoeff = "entropy_coeff"
)

// checkKLEntropy fails an unknown KL estimator, or an entropy
// coefficient that is not a finite number ≥ 0, at its key: the script
// would refuse them too (exit 78), but only once the iteration reaches
// the train stage.
func checkKLEntropy(c kind.Checker, hp map[string]any) {
	if v, ok := hp[KLEstimator]; ok {
		if s, isString := v.(string); !isString || !grpo.KLEstimator(s).Known() {
			c.Fail("hyperparameters."+KLEstimator, "", "%s: %v; use k1, k2 or k3 (verl's kl, mse or low_var_kl)", c.Path("hyperparameters."+KLEstimator), v)
		}
	}
	if v, ok := hp[EntropyCoeff]; ok {
		var x float64
		switch n := v.(type) {
		case int:
			x = float64(n)
		case float64:
			x = n
		default:
			x = math.NaN()
		}
		if !(x >= 0) || math.IsInf(x, 0) {
			c.Fail("hyperparameters."+EntropyCoeff, "", "%s: %v; it must be a number ≥ 0 (0 is off; 0.001–0.01 is typical)", c.Path("hyperparameters."+EntropyCoeff), v)
		}
	}
}
