package sandbox

import (
	"errors"
	"fmt"
)

// Errors of Run and Available, tested with errors.Is.
//
// A program that fails, crashes or exceeds a limit is not an error: it is a
// Result. An error means no verdict exists, and the caller must not turn it
// into a reward.
var (
	// ErrInfra: the sandbox could not start (bwrap missing or refused to
	// set up, the workspace could not be created). Retrying elsewhere may help.
	ErrInfra = errors.New("sandbox could not start")
	// ErrNoBwrap wraps ErrInfra: the bubblewrap binary is not installed.
	ErrNoBwrap = fmt.Errorf("bubblewrap (bwrap) is not installed; install it with `apt-get install bubblewrap` "+
		"(Debian, Ubuntu) or `make deps`: %w", ErrInfra)
	// ErrInvalid: the Spec is wrong (empty command, a file name that leaves
	// the workspace, a negative limit). Retrying cannot help.
	ErrInvalid = errors.New("invalid sandbox spec")
)
