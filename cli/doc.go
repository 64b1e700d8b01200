// Package cli is the rlpipe command line. Main runs it in-process: it takes
// the arguments, the three standard streams, and returns the exit code, so
// that cli/rlpipe/main.go is one call and tests drive the whole command
// with buffers. The one thing main adds is `rlpipe temporal dev`'s server
// (WithTemporalDevServer): Temporal's server is linked into the binary, not
// into this package and its tests. A caller that runs `rlpipe run` in
// process can also watch the engine's events as they come
// (WithRunEvents): bench/trl reads the process's CPU time at each
// iteration's start from them.
//
// # Commands
//
// The store commands work on the repository --store names (a path for the
// embedded store, default ./.rlpipe or $RLPIPE_STORE; lakefs://REPO for a
// lakeFS server configured with lakectl's LAKECTL_* variables). Artifacts
// are named git-style, REF:PATH:
//
//	rlpipe init-store
//	rlpipe import prompts.jsonl main:data/prompts.parquet
//	rlpipe commit main -m "add prompts"
//	rlpipe branch create try-reward --from main
//	rlpipe diff main try-reward
//	rlpipe merge try-reward main
//	rlpipe log main
//	rlpipe ls main:data/
//	rlpipe cat main:data/prompts.parquet
//
// Every command that prints a result takes -o json and then prints one JSON
// document (an object or an array) whose fields are only ever added to;
// text output is aligned for people and may change.
//
// # Exit codes and errors
//
// Main returns ExitOK, ExitFailure when the command ran and failed (a merge
// conflict, a missing object), and ExitUsage when it was called wrongly:
// an unknown command or flag, a wrong number of arguments, a malformed
// argument, or a store error that blames an argument (artifacts.ErrInvalid
// and the errors that wrap it: an unparsable or ambiguous ref, a write to a
// tag). Errors print on stderr as "rlpipe: message" followed by what to do
// next: the command that creates a missing store, commits or resets a
// dirty branch, or resolves a merge conflict.
//
// # Logs
//
// The logger is built once, from --log-level and -v: a console writer when
// stderr is a terminal, JSON lines otherwise, always on stderr so that
// stdout holds only results. Commands hand it to libraries in the context
// (zerolog.Ctx) and in artifacts.Options. The values of lakectl's
// credential variables are blanked out of every log line and error message.
//
// # Layout
//
// Each command follows one shape: newXCommand builds the cobra command, an
// xOptions struct with AddFlags holds its flags, and RunE calls xFunc, a
// plain function that takes the opened store and writes to the command's
// output. The plumbing is shared: rootOptions.onStore is the RunE of a
// store command (open the store, call the body with the arguments and the
// command's printer, close the store); withOptions finishes a command
// whose flags fill an options struct (it adds AddFlags's flags and hands
// RunE the parsed options as a value), and storeCommand is both at once,
// so a store command is its cobra.Command literal plus a function of
// (ctx, store, options, args, printer). Nothing lives in package
// variables, so each run builds a fresh tree.
package cli
