package pipeline

import (
	"context"
	"errors"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/internal/registry"
)

// An ExecutorKind is what `rlpipe run --executor NAME` names: a way to run
// a run's task calls, listed in the registry (kind.Registry's Executors,
// assembled in cli/kinds). Open makes the executor of one run; a nil
// Executor is this process (the local executor). An executor kind is one
// file with its value and one entry in that list; its test runs
// pipeline/executortest.Run on what Open returns.
type ExecutorKind interface {
	// Name is what --executor says ("local", "temporal").
	Name() string
	// Open returns the executor of one run; it lives as long as ctx.
	Open(ctx context.Context, env ExecutorEnv) (Executor, error)
}

// ExecutorEnv is what an executor kind opens a run's executor with.
type ExecutorEnv struct {
	// Store is the run's store; Repository its name (Repository.Name).
	Store      artifacts.Store
	Repository string
	// Pipeline is the pipeline's id (driver.PipelineID): workers of the
	// same pipeline serve its calls.
	Pipeline string
	Logger   zerolog.Logger
	// Getenv reads the kind's settings from the environment (a server's
	// address); nil reads none.
	Getenv func(string) string
}

// Env is the environment variable key, or def when it is unset or empty.
func (e ExecutorEnv) Env(key, def string) string {
	if e.Getenv != nil {
		if v := e.Getenv(key); v != "" {
			return v
		}
	}
	return def
}

// ErrUnknownExecutor is an executor name no executor kind of the registry
// has.
var ErrUnknownExecutor = errors.New("unknown executor")

// ExecutorKinds are the executor kinds a program offers.
type ExecutorKinds []ExecutorKind

// Names lists the names, sorted; Lookup finds one by name (an unknown
// name is an ErrUnknownExecutor that lists them).
func (ks ExecutorKinds) Names() []string { return registry.Names(ks) }
func (ks ExecutorKinds) Lookup(name string) (ExecutorKind, error) {
	return registry.Lookup(ks, name, ErrUnknownExecutor)
}

// Local is the executor kind "local": every call runs in this process,
// under the machine's resources (RunOptions.Executor nil).
var Local ExecutorKind = localKind{}

type localKind struct{}

func (localKind) Name() string { return "local" }
func (localKind) Open(context.Context, ExecutorEnv) (Executor, error) {
	return nil, nil
}
