package kind

import (
	"errors"

	"github.com/rlpipe/rlpipe/internal/registry"
)

// A Loss is a policy loss a trainer section's loss key names
// (trainer.loss). The registry knows only its name: the trainer that
// computes it finds its own contract by type assertion (the embedded
// trainer's is trainers/grpo.PolicyLoss), since the losses live above
// this layer.
type Loss interface{ Name() string }

// ErrUnknownLoss is a loss name no loss of the registry has.
var ErrUnknownLoss = errors.New("unknown policy loss")

// Losses are the policy losses a program offers.
type Losses []Loss

// Names lists the names, sorted; Lookup finds one by name (an unknown
// name is an ErrUnknownLoss that lists them).
func (ls Losses) Names() []string { return registry.Names(ls) }
func (ls Losses) Lookup(name string) (Loss, error) {
	return registry.Lookup(ls, name, ErrUnknownLoss)
}
