package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
)

// EnvStore names the environment variable that picks the store when
// --store is not given.
const EnvStore = "RLPIPE_STORE"

// Output formats for -o.
const (
	outputText = "text"
	outputJSON = "json"
)

// rootOptions are the persistent flags every command shares, plus what
// the root sets up from them before a command runs.
type rootOptions struct {
	store    string
	output   string
	logLevel string
	verbose  bool

	env    environ
	logger zerolog.Logger
}

// AddFlags registers the persistent flags. The store default comes from
// RLPIPE_STORE, else the embedded store in the working directory.
func (o *rootOptions) AddFlags(fs *pflag.FlagSet) {
	def := o.env.getenv(EnvStore)
	if def == "" {
		def = artifacts.DefaultURI
	}
	fs.StringVar(&o.store, "store", def, "store URI: a path for the embedded store, or lakefs://REPO (env "+EnvStore+")")
	fs.StringVarP(&o.output, "output", "o", outputText, "output format: text or json")
	fs.StringVar(&o.logLevel, "log-level", "warn", "log level: trace, debug, info, warn, error or disabled")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "verbose logs (same as --log-level debug)")
}

// validate checks the flag values and sets up the logger.
func (o *rootOptions) validate() error {
	switch o.output {
	case outputText, outputJSON:
	default:
		return usagef("invalid -o %q: use text or json", o.output)
	}
	level, err := zerolog.ParseLevel(strings.ToLower(o.logLevel))
	if err != nil || o.logLevel == "" {
		return usagef("invalid --log-level %q: use trace, debug, info, warn, error or disabled", o.logLevel)
	}
	if o.verbose && level > zerolog.DebugLevel {
		level = zerolog.DebugLevel
	}
	o.logger = newLogger(o.env.stderr, newRedactor(o.env.getenv), level)
	return nil
}

// newLogger is the one place that decides how logs look: a console writer
// on a terminal, JSON lines otherwise, always on stderr, with credentials
// redacted from every line. Tasks log from many goroutines: a stderr that
// is not a file (a buffer, when the CLI is embedded or tested) gets one
// line at a time.
func newLogger(stderr io.Writer, r redactor, level zerolog.Level) zerolog.Logger {
	var w io.Writer = stderr
	f, isFile := stderr.(*os.File)
	switch {
	case isFile && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())):
		w = zerolog.ConsoleWriter{Out: f, TimeFormat: time.TimeOnly}
	case !isFile:
		w = zerolog.SyncWriter(stderr)
	}
	return zerolog.New(r.writer(w)).Level(level).With().Timestamp().Logger()
}

// json reports whether -o json was asked for.
func (o *rootOptions) json() bool { return o.output == outputJSON }

// open opens the store, explaining how to create it when it is missing.
func (o *rootOptions) open(ctx context.Context, cmd *cobra.Command) (artifacts.Store, error) {
	if err := o.checkScheme(); err != nil {
		return nil, err
	}
	zerolog.Ctx(ctx).Debug().Str("store", o.store).Msg("open store")
	st, err := artifacts.Open(ctx, o.store, &artifacts.Options{Logger: o.logger})
	if errors.Is(err, artifacts.ErrRepositoryNotFound) {
		return nil, explain(err, "no store at %s: run `%s`", o.store, o.initCommand(cmd))
	}
	if err != nil {
		// A store that cannot be reached or is not configured is not a
		// mistake in the command line.
		return nil, failure(withOp(err, "open store %s", o.store))
	}
	return st, nil
}

// checkScheme rejects a --store whose scheme no backend serves.
func (o *rootOptions) checkScheme() error {
	scheme := artifacts.Scheme(o.store)
	if !slices.Contains(artifacts.Schemes(), scheme) {
		return usagef("--store %s: no backend for %s:// (use a path for the embedded store, or lakefs://REPO)", o.store, scheme)
	}
	return nil
}

// initCommand is the command line that creates the store o names.
func (o *rootOptions) initCommand(cmd *cobra.Command) string {
	line := "rlpipe init-store"
	if cmd.Flags().Changed("store") {
		line = "rlpipe --store " + shellQuote(o.store) + " init-store"
	}
	if artifacts.Scheme(o.store) == "lakefs" {
		line += " --storage-namespace NAMESPACE"
	}
	return line
}

// withStore opens the store, runs fn with the command's context (which
// carries the logger) and closes the store.
func (o *rootOptions) withStore(cmd *cobra.Command, fn func(ctx context.Context, st artifacts.Store) error) (err error) {
	ctx := cmd.Context()
	st, err := o.open(ctx, cmd)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := st.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close store %s: %w", o.store, cerr)
		}
	}()
	return fn(ctx, st)
}

// onStore is the RunE of a command that works on the store: it opens the
// store, runs fn with the command's arguments and its printer, and closes
// the store (withStore).
func (o *rootOptions) onStore(fn func(ctx context.Context, st artifacts.Store, args []string, p printer) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return o.withStore(cmd, func(ctx context.Context, st artifacts.Store) error {
			return fn(ctx, st, args, o.printer(cmd))
		})
	}
}

// flagAdder is a command's options struct: it adds the command's flags.
type flagAdder interface {
	AddFlags(fs *pflag.FlagSet)
}

// options is a pointer to an options struct O, which adds O's flags.
type options[O any] interface {
	*O
	flagAdder
}

// withOptions finishes cmd, a command whose flags fill an options struct
// O: it adds O's flags, and its RunE calls run with the options the flags
// were parsed into.
func withOptions[O any, P options[O]](cmd *cobra.Command, run func(cmd *cobra.Command, o O, args []string) error) *cobra.Command {
	var o O
	P(&o).AddFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return run(cmd, o, args)
	}
	return cmd
}

// storeCommand is withOptions for a command that works on the store: run
// gets the opened store, the parsed options, the arguments and the
// command's printer (onStore).
func storeCommand[O any, P options[O]](g *rootOptions, cmd *cobra.Command, run func(ctx context.Context, st artifacts.Store, o O, args []string, p printer) error) *cobra.Command {
	return withOptions[O, P](cmd, func(cmd *cobra.Command, o O, args []string) error {
		return g.onStore(func(ctx context.Context, st artifacts.Store, args []string, p printer) error {
			return run(ctx, st, o, args, p)
		})(cmd, args)
	})
}

// printer returns the output for a command: its writer and the format.
func (o *rootOptions) printer(cmd *cobra.Command) printer {
	return printer{w: cmd.OutOrStdout(), json: o.json()}
}

// newRootCommand builds the rlpipe command tree for one run.
func newRootCommand(env environ) *cobra.Command {
	o := &rootOptions{env: env, logger: zerolog.Nop()}
	root := &cobra.Command{
		Use:   "rlpipe",
		Short: "RL loops for language models as versioned data pipelines",
		Long: `rlpipe runs reinforcement-learning loops for language models as versioned
data pipelines. Every artifact lives in a git-like store (embedded by default,
a lakeFS server with --store lakefs://REPO) and is named REF:PATH, e.g.
main:data/prompts.parquet.`,
		Example: `  rlpipe init-store
  rlpipe import prompts.jsonl main:data/prompts.parquet
  rlpipe commit main -m "add prompts"
  rlpipe branch create try-reward --from main
  rlpipe diff main try-reward`,
		Args:          subcommandArgs,
		RunE:          helpWithoutArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			cmd.SetContext(o.logger.WithContext(cmd.Context()))
			return nil
		},
	}
	o.AddFlags(root.PersistentFlags())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })
	root.CompletionOptions.HiddenDefaultCmd = true

	root.AddCommand(
		newInitStoreCommand(o),
		newRepoCommand(o),
		newBranchCommand(o),
		newTagCommand(o),
		newCommitCommand(o),
		newLogCommand(o),
		newLsCommand(o),
		newCatCommand(o),
		newStatCommand(o),
		newPutCommand(o),
		newRmCommand(o),
		newImportCommand(o),
		newExportCommand(o),
		newDiffCommand(o),
		newMergeCommand(o),
		newRevertCommand(o),
		newGCCommand(o),
		newFsckCommand(o),
		newStoreCommand(o),
		newRunCommand(o), newStatusCommand(o),
		newRescoreCommand(o), newRewardsCommand(o), newTrackCommand(o),
		newPolicyCommand(o), newDatasetCommand(o), newEvalCommand(o), newReportCommand(o), newEvalsCommand(o), newCompareCommand(o), newUICommand(o), newWorkerCommand(o),
		newTemporalCommand(o),
	)
	return root
}

// newGroupCommand builds a command that only holds subcommands (branch,
// tag, repo): alone it prints its help; an unknown subcommand is a usage
// error.
func newGroupCommand(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  subcommandArgs,
		RunE:  helpWithoutArgs,
	}
	c.AddCommand(subs...)
	return c
}

// subcommandArgs rejects arguments to a command that only has
// subcommands: they are a misspelt subcommand.
func subcommandArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	cmd.SuggestionsMinimumDistance = 2
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return usagef("%s", msg)
}

func helpWithoutArgs(cmd *cobra.Command, _ []string) error { return cmd.Help() }

// exactArgs requires exactly the named arguments, e.g. exactArgs("SOURCE",
// "DEST"), and says which are missing or extra.
func exactArgs(names ...string) cobra.PositionalArgs {
	return rangeArgs(len(names), names...)
}

// rangeArgs requires the first min of the named arguments and allows the
// rest.
func rangeArgs(min int, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < min:
			return usagef("%s: missing %s", commandName(cmd), strings.Join(names[len(args):min], " "))
		case len(args) > len(names):
			return usagef("%s: unexpected argument %q", commandName(cmd), args[len(names)])
		}
		return nil
	}
}

// commandName is a command's path without the program name: "branch create".
func commandName(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return cmd.Name()
	}
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == '@' || r == '=' || r == '+' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
