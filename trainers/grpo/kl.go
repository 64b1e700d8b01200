package grpo

import (
	"fmt"
	"math"
)

// KLEstimator names the per-token estimate of KL(π ‖ π_ref) that the loss
// adds, weighted by β (Schulman's k1, k2, k3; verl's kl_penalty). With
// δ = logπ_ref − logπ:
//
//	k1 = −δ             (verl "kl")          ∂/∂logπ = 1
//	k2 = ½·δ²           (verl "mse")         ∂/∂logπ = −δ
//	k3 = e^δ − δ − 1    (verl "low_var_kl")  ∂/∂logπ = 1 − e^δ
//
// k3, the default, is non-negative and unbiased with a low variance (the
// GRPO paper's); k1 is unbiased but takes both signs per token; k2 is
// biased but its gradient is that of the true KL's second-order term.
type KLEstimator string

const (
	K1 KLEstimator = "k1"
	K2 KLEstimator = "k2"
	K3 KLEstimator = "k3"
)

// KLEstimators are the estimators' names, for messages.
var KLEstimators = []KLEstimator{K1, K2, K3}

// Canonical is k's spelling in options and versions: verl's names kl,
// mse and low_var_kl are K1, K2 and K3, and the empty name is K3, the
// default.
func (k KLEstimator) Canonical() KLEstimator {
	switch k {
	case "", "low_var_kl":
		return K3
	case "kl":
		return K1
	case "mse":
		return K2
	}
	return k
}

// Known reports whether k (after Canonical) is an estimator Loss
// computes.
func (k KLEstimator) Known() bool {
	switch k.Canonical() {
	case K1, K2, K3:
		return true
	}
	return false
}

// ErrUnknownKLEstimator is an estimator name Loss does not compute.
var ErrUnknownKLEstimator = fmt.Errorf("unknown kl estimator (use %s, %s or %s; verl's kl, mse and low_var_kl are the same)", K1, K2, K3)

// term is the estimate for one token and its derivative with respect to
// logπ, for δ = logπ_ref − logπ. k3 is not clamped: a δ that overflows
// exp makes the loss infinite, and Loss fails with ErrNonFinite (verl
// clamps δ to ±20 and k3 to ±10 instead; see docs/TRAINERS.md).
func (k KLEstimator) term(d float64) (value, grad float64) {
	switch k {
	case K1:
		return -d, 1
	case K2:
		return d * d / 2, -d
	}
	e := math.Exp(d)
	return e - d - 1, 1 - e // ∂k3/∂logπ = −e^δ + 1
}
