package embedded

import "errors"

// Errors of the trainer, tested with errors.Is. A step whose loss, ratio
// or gradient is not finite fails with an error wrapping
// grpo.ErrNonFinite.
var (
	// ErrOptions: an option cannot work; the message names its JSON key.
	ErrOptions = errors.New("invalid trainer options")
	// ErrBatch: the prompts, trajectories and rewards of an iteration do
	// not fit together (a reward for a sample that was never generated, a
	// completion the model cannot have produced).
	ErrBatch = errors.New("inconsistent training batch")
)
