package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/driver"
	"github.com/rlpipe/rlpipe/reports"
)

type runOptions struct {
	file      string
	run       string
	noCache   bool
	noOverlap bool
	report    string
	noReport  bool
	// storeDir is the embedded store's directory ("" for other backends):
	// the default report goes to storeDir/reports/RUN.html.
	storeDir string
	// executor names an executor kind of the registry (local, temporal);
	// temporal is the Temporal mode's connection flags; executorOf is the
	// run's executor the named kind opened (nil: this process).
	executor   string
	temporal   temporalOptions
	executorOf pipeline.Executor
	overrides  overrideOptions
	// allowConfigChange resumes a run whose config changed a key that
	// alters what its committed iterations mean.
	allowConfigChange bool
}

// temporalMode is --executor temporal: not an executor kind of the
// registry but the command's own mode, in which the loop itself runs as a
// Temporal workflow that driver workers serve (runOnTemporal,
// docs/DEPLOY.md). It needs the command's workers and Temporal's SDK,
// which only pipeline/temporalrun and the command link; the executor
// kinds of the registry run the loop in this process.
const temporalMode = "temporal"

// openExecutor opens the run's executor of kind k.
func openExecutor(ctx context.Context, k pipeline.ExecutorKind, st artifacts.Store, cfg *config.Config, g *rootOptions) (pipeline.Executor, error) {
	repo, err := st.Repository(ctx)
	if err != nil {
		return nil, failure(withOp(err, "open store %s", g.store))
	}
	pid, err := driver.PipelineID(cfg)
	if err != nil {
		return nil, failure(err)
	}
	x, err := k.Open(ctx, pipeline.ExecutorEnv{Store: st, Repository: repo.Name, Pipeline: pid, Logger: g.logger, Getenv: g.env.getenv})
	if err != nil {
		return nil, failure(fmt.Errorf("run: --executor %s: %w", k.Name(), err))
	}
	return x, nil
}

func (o *runOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.file, "file", "f", "pipeline.yaml", "the pipeline config (see docs/PIPELINE.md)")
	fs.StringVar(&o.run, "run", "", "run name (default: the config's run); its branch is runs-NAME")
	fs.BoolVar(&o.noCache, "no-cache", false, "run every task even when a cached result matches")
	fs.BoolVar(&o.noOverlap, "no-overlap", false, "run on-policy: generate each iteration with the previous iteration's adapter (overlap.max_staleness 0)")
	fs.StringVar(&o.report, "report", "", "the HTML report refreshed after every iteration (default: reports/RUN.html in the embedded store's directory, else report-RUN.html here)")
	fs.BoolVar(&o.noReport, "no-report", false, "do not write the HTML report")
	fs.StringVar(&o.executor, "executor", "local", "where tasks run: local (this process) or temporal (workers per environment; see docs/DEPLOY.md)")
	o.temporal.AddFlags(fs, true)
	fs.BoolVar(&o.temporal.noDriver, "no-driver", false, "with --executor temporal: only start or attach to the run; driver workers (rlpipe worker --driver) run the loop")
	fs.BoolVar(&o.allowConfigChange, "allow-config-change", false, "resume a run whose config changed a key that alters what its committed iterations mean (trainer.lr, seed, dataset, …; docs/PIPELINE.md)")
	o.overrides.AddFlags(fs)
}

func newRunCommand(g *rootOptions) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run -f pipeline.yaml [key.path=value …] [--run NAME] [--no-cache]",
		Short: "run or resume an RL loop described by a pipeline config",
		Long: `Run the RL loop a pipeline config describes, on the run branch runs-NAME.
A run that stopped (a crash, Ctrl-C) resumes from its last committed
iteration; finished tasks of the interrupted one are cache hits. Only one
process runs a given run at a time.

The store is --store, else RLPIPE_STORE, else the config's store, else
.rlpipe in the working directory. On a terminal a live display shows each
stage; otherwise the run's events are logged as JSON lines on stderr.

With --executor temporal each environment's tasks run on the workers
that serve its queue (rlpipe worker --env NAME) and the loop runs as a
Temporal workflow: Ctrl-C detaches, and the run goes on while a driver
worker serves it (docs/DEPLOY.md).

Arguments key.path=value (and --set key.path=value) override keys of the
config, each value read as YAML: trainer.lr=1e-6, eval.k=[1,8],
stages.generate.sampling={temperature: 0.7}. The run records the config
with its overrides (docs/CONFIG.md).`,
		Example: `  rlpipe run -f examples/standin/pipeline.yaml
  rlpipe run -f pipeline.yaml --run exp2 --no-cache
  rlpipe run -f examples/arithmetic/pipeline.yaml --run arith-lr trainer.lr=1e-3 iterations=20
  rlpipe run -f examples/arithmetic/pipeline.yaml --run arith-onpolicy --no-overlap
  rlpipe run -f pipeline.yaml -o json
  rlpipe --store lakefs://rl run -f pipeline.yaml --executor temporal --temporal temporal.internal:7233`,
		Args: overrideArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := o.overrides.load(o.file, args)
			if err != nil {
				return failure(err)
			}
			if o.noOverlap {
				cfg.Overlap.MaxStaleness = 0
			}
			if !cmd.Flags().Changed("store") && g.env.getenv(EnvStore) == "" && cfg.Store != "" {
				g.store = cfg.Store
			}
			if !strings.Contains(g.store, "://") {
				o.storeDir = g.store
			}
			d := runDisplay{stderr: g.env.stderr, terminal: isTerminal(g.env.stderr), logger: g.logger,
				verbose: cmd.Flags().Changed("log-level") || g.verbose, onEvent: g.env.onEvent}
			if o.executor == temporalMode {
				return runOnTemporal(cmd, g, cfg, o, d)
			}
			reg := kinds.Registry()
			ek, err := reg.Executors.Lookup(o.executor)
			if err != nil {
				return usagef("run: --executor %q: use %s or %s", o.executor, strings.Join(reg.Executors.Names(), ", "), temporalMode)
			}
			return g.withStore(cmd, func(ctx context.Context, st artifacts.Store) error {
				if o.executorOf, err = openExecutor(ctx, ek, st, cfg, g); err != nil {
					return err
				}
				return runFunc(ctx, st, cfg, o, d, g.printer(cmd))
			})
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// runDisplay is how a run shows its progress.
type runDisplay struct {
	stderr   io.Writer
	terminal bool // draw the live display
	verbose  bool // the log level was asked for explicitly
	logger   zerolog.Logger
	onEvent  func(pipeline.Event) // the caller's hook (WithRunEvents), after the display
}

// engineLogger is the logger the engine reports events to: on a terminal
// the display shows them (logs only when asked for); otherwise every
// event is a JSON line.
func (d runDisplay) engineLogger() zerolog.Logger {
	switch {
	case d.verbose:
		return d.logger
	case d.terminal:
		return zerolog.Nop()
	}
	if d.logger.GetLevel() > zerolog.InfoLevel {
		return d.logger.Level(zerolog.InfoLevel)
	}
	return d.logger
}

// runOut is the JSON shape of run: the driver's summary, and where the
// command put what it made of it.
type runOut struct {
	driver.Summary
	// Report is the HTML report's path ("" with --no-report).
	Report string `json:"report,omitempty"`
	// Workflow is the run's Temporal workflow id (--executor temporal).
	Workflow string `json:"workflow,omitempty"`
}

// runFunc is `rlpipe run` in this process: the run shown as it goes,
// its report refreshed after every iteration, and its summary printed.
func runFunc(ctx context.Context, st artifacts.Store, cfg *config.Config, o runOptions, d runDisplay, p printer) error {
	name, err := runName(cfg, o)
	if err != nil {
		return err
	}
	reportPath := o.report
	switch {
	case o.noReport:
		reportPath = ""
	case reportPath != "":
	case o.storeDir != "":
		reportPath = filepath.Join(o.storeDir, "reports", name+".html")
		if err := os.MkdirAll(filepath.Dir(reportPath), 0o755); err != nil {
			return failure(fmt.Errorf("run %s: report directory: %w", name, err))
		}
	default:
		reportPath = "report-" + name + ".html"
	}
	onCommit, stopRefresh := refreshReport(ctx, st, name, reportPath, d.logger)
	sum, err := d.runner(p)(ctx, st, cfg, driver.Options{Name: name, NoCache: o.noCache, AllowConfigChange: o.allowConfigChange, OnCommit: onCommit, Executor: o.executorOf})
	stopRefresh()
	if err != nil {
		return err
	}
	if err := ranNothing(cfg, sum); err != nil {
		return err
	}
	out := runOut{Summary: sum}
	if reportPath != "" {
		if sum.NewIterations == 0 {
			// Nothing new ran (a finished run): write it once anyway.
			if err := writeRunReport(ctx, st, name, reportPath, nil); err != nil {
				d.logger.Warn().Err(err).Str("run", name).Msg("could not write the report")
			}
		}
		if _, err := os.Stat(reportPath); err == nil {
			out.Report = reportPath
		}
	}
	return printRun(p, out)
}

// ranNothing is the error for a run that already has more iterations
// committed than the config asks for, so that the call did nothing: it
// said "iteration 149 of 2 committed" and exited 0. The exit is 1 and the
// message is at the iterations key, with the two ways on (docs/PIPELINE.md).
func ranNothing(cfg *config.Config, sum driver.Summary) error {
	if sum.NewIterations > 0 || sum.Iterations <= sum.Planned {
		return nil
	}
	return failure(cfg.ErrorAt("iterations",
		fmt.Sprintf("to go on, raise iterations above %d and run again; for a run of %s, give it a new name: rlpipe run -f %s --run NAME", sum.Iterations, plural(sum.Planned, "iteration"), cfg.File()),
		"iterations: %d, but run %s already has %s committed (%s at %s); nothing was run", sum.Planned, sum.Run, plural(sum.Iterations, "iteration"), sum.Branch, shortID(sum.Commit)))
}

// runName is the run's name: --run, else the config's run.
func runName(cfg *config.Config, o runOptions) (string, error) {
	name := cfg.Run
	if o.run != "" {
		name = o.run
	}
	if name == "" {
		return "", usagef("run: name the run with --run NAME or with run: in %s", cfg.File())
	}
	if err := artifacts.ValidateBranchName(runs.Branch(name)); err != nil {
		return "", usagef("run: --run %q: use letters, digits, '_' and '-'", name)
	}
	return name, nil
}

// refreshReport returns the commit hook that refreshes the HTML report
// at path ("" for none) off the loop's path, by one goroutine: commits
// that land while it writes are folded into its next refresh. stop waits
// for the last refresh.
func refreshReport(ctx context.Context, st artifacts.Store, name, path string, log zerolog.Logger) (onCommit func(context.Context, string, int), stop func()) {
	if path == "" {
		return nil, func() {}
	}
	refresh := make(chan struct{}, 1)
	refreshed := make(chan struct{})
	// Each refresh reads only the iterations the last did not.
	cache := &reports.Cache{}
	go func() {
		defer close(refreshed)
		for range refresh {
			// A report that cannot be written is a warning: the run goes on.
			if err := writeRunReport(context.WithoutCancel(ctx), st, name, path, cache); err != nil {
				log.Warn().Err(err).Str("run", name).Msg("could not refresh the report")
			}
		}
	}()
	onCommit = func(context.Context, string, int) {
		select {
		case refresh <- struct{}{}:
		default: // a refresh is pending: it will include this commit
		}
	}
	return onCommit, sync.OnceFunc(func() { close(refresh); <-refreshed })
}

// runner is driver.Run as the command shows it: the overlap warning, the
// live display on a terminal (else the engine's events as log lines), a
// line per committed iteration unless the output is JSON, and errors that
// exit with ExitFailure. The hooks in o run after the display's.
func (d runDisplay) runner(p printer) func(context.Context, artifacts.Store, *config.Config, driver.Options) (driver.Summary, error) {
	return func(ctx context.Context, st artifacts.Store, cfg *config.Config, o driver.Options) (driver.Summary, error) {
		if cfg.Eval != nil {
			if err := warnOverlap(ctx, st, cfg, d.stderr); err != nil {
				return driver.Summary{}, err
			}
		}
		o.Logger, o.EventLogger = d.logger, d.engineLogger()
		var prog *progress
		meter := newPace(cfg.Iterations, time.Now())
		begin, stopDisplay := func() {}, func() {}
		if d.terminal {
			prog = newProgress(d.stderr, o.Name, cfg.Iterations)
			prog.pace = meter
			begin, stopDisplay = animate(prog)
		}
		onEvent, onCommit := o.OnEvent, o.OnCommit
		o.OnEvent = func(e pipeline.Event) {
			meter.event(e)
			if prog != nil {
				prog.event(e)
				begin()
			}
			if onEvent != nil {
				onEvent(e)
			}
			if d.onEvent != nil {
				d.onEvent(e)
			}
		}
		o.OnCommit = func(ctx context.Context, branch string, n int) {
			meter.volume(iterationVolume(ctx, st, branch, n))
			if prog == nil {
				// Elsewhere than a terminal the progress line is an event.
				meter.figures(time.Now()).log(o.EventLogger, o.Name)
			}
			if !p.json {
				for _, line := range iterationReport(ctx, st, branch, n) {
					if prog != nil {
						prog.println(line)
					} else {
						_ = p.Printf("%s\n", line)
					}
				}
			}
			if onCommit != nil {
				onCommit(ctx, branch, n)
			}
		}
		sum, err := driver.Run(ctx, st, cfg, o)
		// The last drawing must come before the summary or error, which
		// are written below it.
		stopDisplay()
		switch {
		case err == nil:
			return sum, nil
		case ctx.Err() != nil:
			// The message says what to do next: no hint below it.
			return sum, failure(explain(err, "%s", err))
		}
		return sum, failure(err)
	}
}

// animate redraws prog every 250ms from begin (the run's first event)
// on, so that the running stages' times move; stop draws it a last time
// if it began.
func animate(prog *progress) (begin, stop func()) {
	begun, halt, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-halt:
			return
		case <-begun:
		}
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-halt:
				prog.tick()
				return
			case <-t.C:
				prog.tick()
			}
		}
	}()
	return sync.OnceFunc(func() { close(begun) }), sync.OnceFunc(func() { close(halt); <-done })
}

// printRun prints a run's summary.
func printRun(p printer, out runOut) error {
	if p.json {
		return p.JSON(out)
	}
	if len(out.StageSeconds) > 0 {
		names := make([]string, 0, len(out.StageSeconds))
		for n := range out.StageSeconds {
			names = append(names, n)
		}
		sort.Slice(names, func(i, j int) bool {
			return stageOrder(names[i]) < stageOrder(names[j]) || stageOrder(names[i]) == stageOrder(names[j]) && names[i] < names[j]
		})
		var parts []string
		for _, n := range names {
			parts = append(parts, fmt.Sprintf("%s %.3fs", n, out.StageSeconds[n]))
		}
		if err := p.Printf("time per call: %s\n", strings.Join(parts, "  ")); err != nil {
			return err
		}
	}
	if err := p.Printf("run %s: iteration %d of %d committed as %s (%d new; %s, %d cached, %s) in %s\n",
		out.Run, out.Iterations, out.Planned, shortID(out.Commit), out.NewIterations,
		plural(out.Tasks, "task"), out.Cached, plural(out.Attempts, "attempt"), (time.Duration(out.Seconds * float64(time.Second))).Round(100*time.Millisecond)); err != nil {
		return err
	}
	if out.Report != "" {
		return p.Printf("report: %s\n", out.Report)
	}
	return nil
}
