package grpo

import "math"

// PPOClip is the clipped surrogate of PPO and GRPO, the default: per
// token, with ρ = exp(logπ − logπ_old),
//
//	ℓ = −min(ρ·A, clip(ρ, 1−ε_low, 1+ε_high)·A)
//
// capped at −c·A when A < 0 and DualClip is c > 0 (dual-clip PPO). verl's
// compute_policy_loss_vanilla.
var PPOClip PolicyLoss = ppoClip{}

type ppoClip struct{}

func (ppoClip) Name() string { return "ppo_clip" }

func (ppoClip) Policy(s *Sequence, o LossOptions, out []TokenLoss) {
	for t, lp := range s.Logprobs {
		if !s.trains(t) {
			continue
		}
		a := s.AdvantageAt(t)
		rho := math.Exp(lp - float64(s.OldLogprobs[t]))
		unclipped := rho * a
		clipped := math.Min(math.Max(rho, 1-o.EpsLow), 1+o.EpsHigh) * a
		switch {
		case a < 0 && rho < 1-o.EpsLow:
			out[t] = TokenLoss{Value: -clipped, Clip: ClipLow}
		case a > 0 && rho > 1+o.EpsHigh:
			out[t] = TokenLoss{Value: -clipped, Clip: ClipHigh}
		case a < 0 && o.DualClip > 0 && rho > o.DualClip:
			out[t] = TokenLoss{Value: -o.DualClip * a, Clip: ClipDual}
		default:
			out[t] = TokenLoss{Value: -unclipped, Grad: -unclipped} // ∂(−ρA)/∂logπ = −ρA
		}
	}
}
