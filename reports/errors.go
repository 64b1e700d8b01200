package reports

import (
	"fmt"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
)

// Errors. ErrNoIterations wraps artifacts.ErrNotFound: a ref that holds no
// run iterations (no iterations/NNNNNN/trajectories.parquet).
var (
	ErrNoIterations = fmt.Errorf("no %s (is this a run branch? runs are on %s): %w",
		runs.IterationPattern(runs.TrajectoriesFile), runs.Branch("<run>"), artifacts.ErrNotFound)
	// ErrInvalidOptions wraps artifacts.ErrInvalid: an alarm threshold or
	// report option out of range.
	ErrInvalidOptions = fmt.Errorf("invalid report options: %w", artifacts.ErrInvalid)
)
