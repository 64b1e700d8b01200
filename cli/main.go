package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/pipeline"
)

// Exit codes returned by Main.
const (
	ExitOK      = 0 // the command did what it was asked
	ExitFailure = 1 // the command ran and failed (a conflict, a missing object, an I/O error)
	ExitUsage   = 2 // the command was called wrongly (unknown flag or command, wrong arguments)
)

// Main runs the rlpipe command line: args are the arguments after the
// program name. It reads the environment (RLPIPE_STORE, the lakectl
// variables), stops cleanly on SIGINT or SIGTERM, and returns the exit code
// for os.Exit: ExitOK, ExitFailure or ExitUsage. opts extend the command
// (WithTemporalDevServer).
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer, opts ...Option) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := environ{stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv}
	for _, o := range opts {
		o(&env)
	}
	return run(ctx, args, env)
}

// environ is everything a run takes from the process, so that tests can
// run the command in-process with buffers and a fixed environment.
type environ struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// temporalDev starts `rlpipe temporal dev`'s server; nil when the
	// program was built without one.
	temporalDev TemporalDevServer
	// onEvent sees the engine's events of an in-process `rlpipe run`
	// (WithRunEvents).
	onEvent func(pipeline.Event)
}

// WithRunEvents has f called with each of the engine's events that
// `rlpipe run` sees in this process, from the engine's goroutines, after
// the command's own display: a caller that runs the command in process
// (a benchmark's clock) sees the iterations as they go.
func WithRunEvents(f func(pipeline.Event)) Option {
	return func(e *environ) { e.onEvent = f }
}

// run executes the command tree once and turns its error into a message
// on stderr and an exit code.
func run(ctx context.Context, args []string, env environ) int {
	if env.getenv == nil {
		env.getenv = func(string) string { return "" }
	}
	if env.stdin == nil {
		env.stdin = strings.NewReader("")
	}
	root := newRootCommand(env)
	root.SetArgs(args)
	root.SetIn(env.stdin)
	root.SetOut(env.stdout)
	root.SetErr(env.stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	code := exitCode(err)
	msg := errorMessage(err)
	// Point at the usage when the command line itself was wrong, not when
	// the store rejected a value (an ambiguous ref).
	var ue *usageError
	if code == ExitUsage && cmd != nil && errors.As(err, &ue) {
		use := cmd.UseLine()
		if cmd.HasSubCommands() {
			use = cmd.CommandPath() + " COMMAND [flags]"
		}
		msg += fmt.Sprintf("\nusage: %s\nsee `%s --help`", use, cmd.CommandPath())
	}
	fmt.Fprintf(env.stderr, "rlpipe: %s\n", newRedactor(env.getenv).redact(msg))
	return code
}

// exitCode maps an error to ExitUsage for a mistake in the call (bad flags
// or arguments, or a store error that blames an argument: an invalid or
// ambiguous ref, a write to a tag) and to ExitFailure otherwise.
func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ue *usageError
	if errors.As(err, &ue) || errors.Is(err, artifacts.ErrInvalid) {
		return ExitUsage
	}
	return ExitFailure
}
