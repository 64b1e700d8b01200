package embedded

import (
	"errors"
	"fmt"

	"github.com/rlpipe/rlpipe/advantages"
)

// Errors of the trainer, tested with errors.Is. A step whose loss, ratio
// or gradient is not finite fails with an error wrapping
// grpo.ErrNonFinite.
var (
	// ErrOptions: an option cannot work; the message names its JSON key.
	ErrOptions = errors.New("invalid trainer options")
	// ErrBatch: the prompts, trajectories and rewards of an iteration do
	// not fit together (a reward for a sample that was never generated, a
	// completion the model cannot have produced). It is
	// advantages.ErrBatch, which the join of the tables returns.
	ErrBatch = advantages.ErrBatch
	// ErrStaleNoLogprobs: a sample drawn by an older adapter
	// (staleness > 0) has no logprobs; rescoring it with the trainer's
	// adapter would drop the staleness correction. It wraps ErrBatch.
	ErrStaleNoLogprobs = fmt.Errorf("%w: a stale sample has no behaviour logprobs", ErrBatch)
	// ErrNoCritic: PPO's critic is on, and the adapter a later iteration
	// continues from has no critic (CriticDir). It is never silently
	// reinitialised: CriticOptions.Missing "fresh" starts a new one.
	ErrNoCritic = errors.New("it has no critic")
	// ErrCheckpointKind: the policy input is a checkpoint of the other
	// kind than the trainer trains: full weights for a LoRA trainer, or
	// an adapter with lora: none.
	ErrCheckpointKind = errors.New("the policy input is not the kind of checkpoint the trainer continues")
)
