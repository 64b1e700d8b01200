package grpo

import (
	"errors"

	"github.com/rlpipe/rlpipe/internal/registry"
)

// A PolicyLoss is the policy term of the loss, per token: the clipped
// surrogate (PPOClip, the default), GSPO's sequence-level ratio, CISPO's
// clipped stop-gradient weight. Loss does the rest the same for every
// policy loss: checking the sequences, the KL term, the aggregation and
// the statistics. A policy loss is one file in this package (a value with
// a Name) and one entry in Losses in cli/kinds; its test runs
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

// ErrUnknownLoss is a loss name no policy loss of the registry has.
var ErrUnknownLoss = errors.New("unknown policy loss")

// Losses are the policy losses a program offers.
type Losses []PolicyLoss

// Names lists the names, sorted; Lookup finds one by name (an unknown
// name is an ErrUnknownLoss that lists them).
func (ls Losses) Names() []string { return registry.Names(ls) }
func (ls Losses) Lookup(name string) (PolicyLoss, error) {
	return registry.Lookup(ls, name, ErrUnknownLoss)
}

// policy is o's policy loss, PPOClip when it names none.
func (o LossOptions) policy() PolicyLoss {
	if o.Policy == nil {
		return PPOClip
	}
	return o.Policy
}
