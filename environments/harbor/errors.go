package harbor

import (
	"errors"
	"fmt"

	"github.com/rlpipe/rlpipe/environments"
)

// Errors, in a %w hierarchy: ErrUnsupported and ErrReward wrap ErrTask, so
// errors.Is(err, ErrTask) catches every problem of a task's own files.
var (
	// ErrTask: a task directory is not a Harbor task rlpipe can read (no
	// task.toml, a TOML error, no instruction.md or tests/test.sh).
	ErrTask = errors.New("harbor task")
	// ErrUnsupported: a task asks for what rlpipe's sandbox cannot give
	// (a Dockerfile instruction besides FROM, WORKDIR, ENV, COPY and RUN,
	// a RUN that needs a package manager, the network or a program the
	// host lacks, a prebuilt image, GPUs, several steps). The task is
	// refused at import, with the reason and the file and line.
	ErrUnsupported = fmt.Errorf("%w: unsupported", ErrTask)
	// ErrReward: tests/test.sh wrote no reward file, an empty one, or one
	// that is not a finite number (reward.txt) or an object of finite
	// numbers (reward.json); or it timed out. The episode has no reward.
	ErrReward = fmt.Errorf("%w: no reward", ErrTask)
	// ErrInfra wraps environments.ErrInfra: a world or a sandbox could not
	// be set up.
	ErrInfra = fmt.Errorf("harbor: %w", environments.ErrInfra)
)
