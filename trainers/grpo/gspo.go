package grpo

import "math"

// GSPO is Group Sequence Policy Optimization's loss (arXiv 2507.18071):
// the clipped surrogate with one ratio per sequence, the geometric mean of
// its tokens' ratios, s = exp(mean_t(logπ − logπ_old)) over the trainable
// tokens. Each token carries s with its own gradient,
// s_t = sg(s)·π_t/sg(π_t), so ∂ℓ_t/∂logπ_t = −s·A when unclipped and 0
// when the sequence's ratio is clipped. log s is capped at 10 (no
// gradient above), as verl's compute_policy_loss_gspo does; DualClip does
// not apply.
var GSPO PolicyLoss = gspo{}

type gspo struct{}

func (gspo) Name() string { return "gspo" }

func (gspo) Policy(s *Sequence, o LossOptions, out []TokenLoss) {
	var sum float64
	n := 0
	for t, lp := range s.Logprobs {
		if s.trains(t) {
			sum += lp - float64(s.OldLogprobs[t])
			n++
		}
	}
	if n == 0 {
		return
	}
	logS := sum / float64(n)
	capped := logS > 10
	r := math.Exp(math.Min(logS, 10))
	for t := range s.Logprobs {
		if !s.trains(t) {
			continue
		}
		a := s.AdvantageAt(t)
		tl := TokenLoss{Value: -r * a, Grad: -r * a}
		switch {
		case a < 0 && r < 1-o.EpsLow:
			tl = TokenLoss{Value: -(1 - o.EpsLow) * a, Clip: ClipLow}
		case a > 0 && r > 1+o.EpsHigh:
			tl = TokenLoss{Value: -(1 + o.EpsHigh) * a, Clip: ClipHigh}
		case capped:
			tl.Grad = 0
		}
		out[t] = tl
	}
}
