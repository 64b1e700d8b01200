package grpo

// Reinforce is the plain policy gradient, verl's reinforce loss type of
// its bypass mode (compute_policy_loss_reinforce): per token
//
//	ℓ = −A·logπ,  ∂ℓ/∂logπ = −A
//
// with no ratio and no clip. It takes the rollout correction's IS weights
// (an ISWeighted loss): with RolloutCorrection.IS set, each token's term
// is multiplied by its truncated weight sg(min(π/π_behaviour, C)), the
// truncated-IS policy gradient of verl's bypass_pg_is preset. Without
// them it ignores how stale a sample is. Its policy_loss, like CISPO's,
// depends on logπ itself. DualClip does not apply.
var Reinforce PolicyLoss = reinforce{}

type reinforce struct{}

func (reinforce) Name() string { return "reinforce" }

func (reinforce) takesISWeights() {}

func (reinforce) Policy(s *Sequence, o LossOptions, out []TokenLoss) {
	for t, lp := range s.Logprobs {
		if s.trains(t) {
			out[t] = TokenLoss{Value: -s.Advantage * lp, Grad: -s.Advantage}
		}
	}
}
