package grpo

import "math"

// CISPO is MiniMax-M1's loss (arXiv 2506.13585): REINFORCE weighted by
// the clipped ratio, the weight under a stop-gradient, so a clipped token
// keeps its gradient. Per token, with ρ = exp(clamp(logπ − logπ_old,
// −20, 20)),
//
//	ℓ = −sg(clip(ρ, 1−ε_low, 1+ε_high))·A·logπ,  ∂ℓ/∂logπ = −clip(ρ)·A
//
// the value verl's compute_policy_loss_cispo reports (so policy_loss is
// not comparable with the ratio losses'). ClipLow and ClipHigh count the
// tokens whose weight was clipped, whatever the advantage's sign; their
// gradient is kept. DualClip does not apply.
var CISPO PolicyLoss = cispo{}

type cispo struct{}

func (cispo) Name() string { return "cispo" }

func (cispo) Policy(s *Sequence, o LossOptions, out []TokenLoss) {
	for t, lp := range s.Logprobs {
		if !s.trains(t) {
			continue
		}
		rho := math.Exp(math.Min(math.Max(lp-float64(s.OldLogprobs[t]), -20), 20))
		w, c := rho, NoClip
		switch {
		case rho < 1-o.EpsLow:
			w, c = 1-o.EpsLow, ClipLow
		case rho > 1+o.EpsHigh:
			w, c = 1+o.EpsHigh, ClipHigh
		}
		a := s.AdvantageAt(t)
		out[t] = TokenLoss{Value: -w * a * lp, Grad: -w * a, Clip: c}
	}
}
