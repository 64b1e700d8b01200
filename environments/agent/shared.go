package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/sandbox"
)

// UnsafePaths checks a final workspace (root, a copy of world) the way the
// agent Env does before its verifier runs (Task, step 3), for
// environments that judge workspaces of their own: it lists, in path
// order, each symlink the episode made that leads out of root, and each
// FIFO, socket or device it made, with what it is ("out/link is a symlink
// to /etc, out of the workspace"). A verifier must not open a workspace
// that has any.
//
// With strict, a link that resolves to nothing beneath root is listed
// too: a verifier that sees the workspace's directories at paths of their
// own (a Harbor task's /app) and other directories beside them (/tests)
// would follow "../tests/…" out of the workspace, where on the host it
// dangles.
func UnsafePaths(root, world string, strict bool) ([]string, error) {
	return checkPaths(root, world, strict)
}

// UnsafeReason says why a verifier did not run, naming the paths
// UnsafePaths found (at most ten).
func UnsafeReason(found []string) string { return unsafeReason(found) }

// GiveToSandbox gives every entry of dir to the sandbox's user
// (sandbox.SandboxUID), as a Cache does with a world it built: for a
// directory a sandboxed program is to change, such as a world being built
// by programs run in the sandbox.
func GiveToSandbox(dir string) error { return chownTree(dir) }

// OpenCache opens the world cache at dir; "" means the user's cache
// directory, rlpipe/worlds (the temporary directory when there is none):
// the default of an environment's world_cache option.
func OpenCache(dir string) (*Cache, error) {
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		dir = filepath.Join(base, "rlpipe", "worlds")
	}
	return NewCache(dir)
}

// OptionLimits are the sandbox limits of an environment's timeout_s,
// memory_mb and procs options (0: the sandbox's defaults).
func OptionLimits(timeoutS float64, memoryMB, procs int) sandbox.Limits {
	return sandbox.Limits{Wall: time.Duration(timeoutS * float64(time.Second)), MemoryBytes: int64(memoryMB) << 20, Procs: procs}
}

// ToolStep is the step of a tool call that ran in the sandbox (r, err from
// sandbox.RunIn, call its number, calls its tool_calls JSON), its
// observation that of ToolObservation.
func ToolStep(ctx context.Context, r sandbox.Result, err error, call int, calls string, info map[string]any, observationBytes int) (environments.Step, error) {
	obs, err := ToolObservation(ctx, r, err, call, observationBytes)
	if err != nil {
		return environments.Step{}, err
	}
	return environments.Step{Observation: obs, ToolCalls: calls, Info: info}, nil
}

// ToolObservation is what the policy sees of a tool call that ran in the
// sandbox (r, err from sandbox.RunIn, call its number): the observation of
// r, cut to observationBytes; why the command cannot run when the sandbox
// refused it (ErrInvalid). The error is for ctx ending, or wraps ErrInfra
// when the sandbox failed, not the script.
func ToolObservation(ctx context.Context, r sandbox.Result, err error, call int, observationBytes int) (string, error) {
	switch {
	case errors.Is(err, sandbox.ErrInvalid):
		return "the command cannot run: " + err.Error(), nil
	case err != nil && ctx.Err() != nil:
		return "", fmt.Errorf("tool call %d: %w", call, err)
	case err != nil:
		return "", fmt.Errorf("tool call %d: %v: %w", call, err, ErrInfra)
	}
	return Observation(r, observationBytes), nil
}
