package grpo

// A PolicyLoss is the policy term of the loss, per token: the clipped
// surrogate (PPOClip, the default), GSPO's sequence-level ratio, CISPO's
// clipped stop-gradient weight. Loss does the rest the same for every
// policy loss: checking the sequences, the KL term, the aggregation and
// the statistics. A policy loss is one file in this package (a value with
// a Name) and one entry in the registry's Losses in cli/kinds (a
// kind.Loss there: the registry sits below this package); its test runs
// trainers/grpo/losstest.
type PolicyLoss interface {
	// Name is what the trainer section's loss key says ("ppo_clip").
	Name() string
	// Policy sets out[t] for every trainable token t of s (out has one
	// entry per token; the others are not read). o has its defaults
	// applied. It must be deterministic and may not keep s or out.
	Policy(s *Sequence, o LossOptions, out []TokenLoss)
}

// TokenLoss is one token's policy term: its value, its derivative with
// respect to the token's logπ, and the clip that acted on it (NoClip).
type TokenLoss struct {
	Value, Grad float64
	Clip        Clip
}

// Clip says which bound of the ratio acted on a token; LossFigures count
// them.
type Clip uint8

const (
	NoClip Clip = iota
	// ClipLow: the ratio was below 1−EpsLow.
	ClipLow
	// ClipHigh: the ratio was above 1+EpsHigh.
	ClipHigh
	// ClipDual: a negative advantage met a ratio above DualClip.
	ClipDual
)

// policy is o's policy loss, PPOClip when it names none.
func (o LossOptions) policy() PolicyLoss {
	if o.Policy == nil {
		return PPOClip
	}
	return o.Policy
}
