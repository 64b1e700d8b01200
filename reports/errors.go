package reports

import (
	"fmt"

	"github.com/rlpipe/rlpipe/artifacts"
)

// Errors. ErrNoIterations wraps artifacts.ErrNotFound: a ref that holds no
// run iterations (no iterations/NNNNNN/trajectories.parquet).
var (
	ErrNoIterations = fmt.Errorf("no iterations/NNNNNN/trajectories.parquet (is this a run branch? runs are on runs-<run>): %w", artifacts.ErrNotFound)
	// ErrInvalidOptions wraps artifacts.ErrInvalid: an alarm threshold or
	// report option out of range.
	ErrInvalidOptions = fmt.Errorf("invalid report options: %w", artifacts.ErrInvalid)
)
