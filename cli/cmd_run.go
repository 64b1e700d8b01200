package cli

import (
	"bytes"
	"context"
	"errors"
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
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
)

// ConfigPath is where a run records its effective config.
const configPath = "run/config.yaml"

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
	// executor is "local" or "temporal"; temporal its connection flags.
	executor string
	temporal temporalOptions
	// exec, when set, runs the tasks (a driver on Temporal sets it).
	exec pipeline.Executor
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
}

func newRunCommand(g *rootOptions) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run -f pipeline.yaml [--run NAME] [--no-cache]",
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
worker serves it (docs/DEPLOY.md).`,
		Example: `  rlpipe run -f examples/standin/pipeline.yaml
  rlpipe run -f pipeline.yaml --run exp2 --no-cache
  rlpipe run -f examples/arithmetic/pipeline.yaml --run arith-onpolicy --no-overlap
  rlpipe run -f pipeline.yaml -o json
  rlpipe --store lakefs://rl run -f pipeline.yaml --executor temporal --temporal temporal.internal:7233`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(o.file, kinds.Registry())
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
				verbose: cmd.Flags().Changed("log-level") || g.verbose}
			if _, ok := g.env.stderr.(*os.File); !ok {
				// The engine logs from many goroutines: a plain io.Writer
				// (a buffer) needs its writes serialised; a file does not.
				d.logger = newLogger(zerolog.SyncWriter(g.env.stderr), newRedactor(g.env.getenv), g.logger.GetLevel())
			}
			switch o.executor {
			case "local":
			case "temporal":
				return runOnTemporal(cmd, g, cfg, o, d)
			default:
				return usagef("run: --executor %q: use local or temporal", o.executor)
			}
			return g.withStore(cmd, func(ctx context.Context, st artifacts.Store) error {
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

// runOut is the JSON shape of run.
type runOut struct {
	Run           string  `json:"run"`
	Branch        string  `json:"branch"`
	Iterations    int     `json:"iterations"`     // the last committed iteration
	NewIterations int     `json:"new_iterations"` // committed by this invocation
	Commit        string  `json:"commit"`
	ConfigHash    string  `json:"config_hash"`
	Cursor        int     `json:"cursor"`
	Tasks         int     `json:"tasks"`    // task calls that finished or were cached
	Cached        int     `json:"cached"`   // of which cache hits
	Attempts      int     `json:"attempts"` // attempts started
	Retries       int     `json:"retries"`
	Seconds       float64 `json:"seconds"`
	// Report is the HTML report's path ("" with --no-report).
	Report string `json:"report,omitempty"`
	// StageSeconds is the mean time per call of each task that ran (not
	// cached), by task name: the iteration time breakdown.
	StageSeconds map[string]float64 `json:"stage_seconds"`
	// Planned is the number of iterations the config asks for.
	Planned int `json:"planned_iterations"`
	// Workflow is the run's Temporal workflow id (--executor temporal).
	Workflow string `json:"workflow,omitempty"`
}

// runStats counts a run's events.
type runStats struct {
	mu                                             sync.Mutex
	tasks, cached, attempts, retries, newCommitted int
	// stageTime and stageCalls sum the durations of finished calls by task.
	stageTime  map[string]time.Duration
	stageCalls map[string]int
}

// breakdown is the mean seconds per finished call of each task.
func (s *runStats) breakdown() map[string]float64 {
	out := map[string]float64{}
	for name, d := range s.stageTime {
		out[name] = (d / time.Duration(s.stageCalls[name])).Round(time.Millisecond).Seconds()
	}
	return out
}

func (s *runStats) event(e pipeline.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e.Kind {
	case pipeline.EventFinished:
		s.tasks++
		if s.stageTime == nil {
			s.stageTime, s.stageCalls = map[string]time.Duration{}, map[string]int{}
		}
		name := strings.TrimSuffix(e.Task, "-start")
		s.stageTime[name] += e.Duration
		s.stageCalls[name]++
	case pipeline.EventCached:
		s.tasks++
		s.cached++
	case pipeline.EventStarted:
		s.attempts++
	case pipeline.EventRetried:
		s.retries++
	case pipeline.EventCommitted:
		s.newCommitted++
	}
}

func runFunc(ctx context.Context, st artifacts.Store, cfg *config.Config, o runOptions, d runDisplay, p printer) error {
	out, err := runLoop(ctx, st, cfg, o, d, p)
	if err != nil {
		return err
	}
	return printRun(p, out)
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
	if err := artifacts.ValidateBranchName(pipeline.RunBranch(name)); err != nil {
		return "", usagef("run: --run %q: use letters, digits, '_' and '-'", name)
	}
	return name, nil
}

// runLoop runs or resumes the loop to its end, printing a line per
// committed iteration, and returns the summary.
func runLoop(ctx context.Context, st artifacts.Store, cfg *config.Config, o runOptions, d runDisplay, p printer) (out runOut, err error) {
	start := time.Now()
	name, err := runName(cfg, o)
	if err != nil {
		return out, err
	}
	if cfg.Eval != nil {
		if err := warnOverlap(ctx, st, cfg, d.stderr); err != nil {
			return out, err
		}
	}
	plan, err := cfg.Plan()
	if err != nil {
		return out, failure(err)
	}
	defer plan.Close()
	effective := *cfg
	effective.Run, effective.Store = name, ""
	body, err := effective.YAML()
	if err != nil {
		return out, err
	}
	body = append([]byte(fmt.Sprintf("# effective pipeline config of run %s, secrets redacted\n# config-hash: %s\n", name, plan.Run.ConfigHash)), body...)

	stats := &runStats{}
	var prog *progress
	if d.terminal {
		prog = newProgress(d.stderr, name, plan.Loop.Iterations)
	}
	plan.Run.Name = name
	plan.Run.NoCache = o.noCache
	plan.Run.Executor = o.exec
	plan.Run.Logger = d.engineLogger()
	plan.Run.OnEvent = func(e pipeline.Event) {
		stats.event(e)
		if prog != nil {
			prog.event(e)
		}
	}
	run, err := pipeline.Open(ctx, st, plan.Run)
	if errors.Is(err, pipeline.ErrRunLocked) {
		return out, failure(err) // the engine's message names the run and its holder
	}
	if err != nil {
		return out, failure(withOp(err, "run %s", name))
	}
	defer func() {
		if cerr := run.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("run %s: %w", name, cerr)
		}
	}()
	staged, err := stageConfig(ctx, st, run.Branch(), body, d.logger)
	if err != nil {
		return out, failure(fmt.Errorf("run %s: record %s: %w", name, configPath, err))
	}

	stopDisplay := func() {}
	if prog != nil {
		prog.tick()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(250 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					prog.tick()
				}
			}
		}()
		// The last drawing must come before the summary or error, which
		// are written below it.
		stopDisplay = sync.OnceFunc(func() { close(stop); wg.Wait(); prog.tick() })
		defer stopDisplay()
	}

	reportPath := o.report
	switch {
	case reportPath != "":
	case o.storeDir != "":
		reportPath = filepath.Join(o.storeDir, "reports", name+".html")
		if err := os.MkdirAll(filepath.Dir(reportPath), 0o755); err != nil {
			return out, failure(fmt.Errorf("run %s: report directory: %w", name, err))
		}
	default:
		reportPath = "report-" + name + ".html"
	}
	// The report is refreshed off the loop's path by one goroutine; commits
	// that land while it writes are folded into its next refresh, and the
	// last refresh finishes before the run returns.
	refresh := make(chan struct{}, 1)
	refreshed := make(chan struct{})
	go func() {
		defer close(refreshed)
		for range refresh {
			// A report that cannot be written is a warning: the run goes on.
			if err := writeRunReport(context.WithoutCancel(ctx), st, name, reportPath); err != nil {
				d.logger.Warn().Err(err).Str("run", name).Msg("could not refresh the report")
			}
		}
	}()
	stopRefresh := sync.OnceFunc(func() { close(refresh); <-refreshed })
	defer stopRefresh()
	plan.Loop.OnCommit = func(n int) {
		if !p.json {
			for _, line := range iterationReport(ctx, st, run.Branch(), n) {
				if prog != nil {
					prog.println(line)
				} else {
					_ = p.Printf("%s\n", line)
				}
			}
		}
		if !o.noReport {
			select {
			case refresh <- struct{}{}:
			default: // a refresh is pending: it will include this commit
			}
		}
	}
	state, err := run.Loop(ctx, plan.Loop, plan.Stages)
	stopRefresh()
	stopDisplay()
	if err != nil {
		if ctx.Err() != nil {
			return out, failure(explain(err, "run %s: interrupted after iteration %d; run the same command again to resume", name, state.Iteration))
		}
		return out, failure(fmt.Errorf("run %s: stopped after iteration %d: %w\nhint: fix the cause and run the same command again: it resumes, and finished tasks are cache hits", name, state.Iteration, err))
	}
	if staged && stats.newCommitted == 0 {
		// No iteration recorded the new config: leave the branch clean.
		if err := st.ResetBranch(ctx, run.Branch(), configPath); err != nil {
			return out, failure(fmt.Errorf("run %s: discard staged %s: %w", name, configPath, err))
		}
	}
	br, err := st.GetBranch(ctx, run.Branch())
	if err != nil {
		return out, failure(withOp(err, "run %s", name))
	}
	stats.mu.Lock()
	out = runOut{Run: name, Branch: run.Branch(), Iterations: state.Iteration, NewIterations: stats.newCommitted,
		Commit: br.CommitID, ConfigHash: plan.Run.ConfigHash, Cursor: state.Cursor,
		Tasks: stats.tasks, Cached: stats.cached, Attempts: stats.attempts, Retries: stats.retries,
		Seconds: time.Since(start).Round(time.Millisecond).Seconds(), StageSeconds: stats.breakdown(),
		Planned: plan.Loop.Iterations}
	if !o.noReport {
		if stats.newCommitted == 0 {
			// Nothing new ran (a finished run): write it once anyway.
			if err := writeRunReport(ctx, st, name, reportPath); err != nil {
				d.logger.Warn().Err(err).Str("run", name).Msg("could not write the report")
			}
		}
		if _, err := os.Stat(reportPath); err == nil {
			out.Report = reportPath
		}
	}
	stats.mu.Unlock()
	return out, nil
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

// stageConfig stages the run's config on its branch unless the branch
// already holds exactly it; it reports whether it staged.
func stageConfig(ctx context.Context, st artifacts.Store, branch string, body []byte, log zerolog.Logger) (bool, error) {
	cur, err := readObject(ctx, st, branch, configPath)
	if err != nil {
		return false, err
	}
	if bytes.Equal(cur, body) {
		return false, nil
	}
	if cur != nil {
		log.Warn().Str("run", branch).Msg("the pipeline config differs from the run's recorded one; the next committed iteration records the new one")
	}
	_, err = st.PutObject(ctx, branch, configPath, bytes.NewReader(body), &artifacts.PutOptions{ContentType: "application/yaml"})
	return err == nil, err
}

// readObject reads a whole object; a missing one is nil, nil.
func readObject(ctx context.Context, st artifacts.Store, ref, path string) ([]byte, error) {
	rc, _, err := st.GetObject(ctx, ref, path)
	if errors.Is(err, artifacts.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}
