package driver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/trackers"
)

// Options are how Run runs a pipeline. The zero value runs the config's
// run on this machine, silently.
type Options struct {
	// Name is the run's name ("" is the config's run:); its branch is
	// runs.Branch(Name).
	Name string
	// NoCache runs every task even when a cached result matches.
	NoCache bool
	// AllowConfigChange resumes a run whose config changes a key that
	// alters what its committed iterations mean (Meaningful); without it
	// such a resume is an ErrConfigChanged. Other changes are warnings.
	AllowConfigChange bool
	// Executor runs the tasks; nil is this process (the local executor).
	Executor pipeline.Executor
	// Logger receives the driver's warnings (the config differs from the
	// one the run recorded).
	Logger zerolog.Logger
	// EventLogger receives the engine's events as log lines, retries and
	// failures at warn; the zero value logs none (for a caller that shows
	// events itself, through OnEvent).
	EventLogger zerolog.Logger
	// OnEvent, when set, is called with each of the engine's events, from
	// the engine's goroutines.
	OnEvent func(pipeline.Event)
	// OnCommit, when set, is called on the loop's path after iteration n
	// committed on branch: what it does (print, refresh a report) delays
	// the loop, so slow work belongs on another goroutine.
	OnCommit func(ctx context.Context, branch string, n int)
	// Trackers tune how the config's tracking section is fed (nil: the
	// defaults); their warnings go to Logger.
	Trackers *trackers.FeedOptions
}

// Summary is what a run did. Its JSON is `rlpipe run -o json`'s and the
// result of a run workflow on Temporal.
type Summary struct {
	Run           string  `json:"run"`
	Branch        string  `json:"branch"`
	Iterations    int     `json:"iterations"`     // the last committed iteration
	NewIterations int     `json:"new_iterations"` // committed by this call
	Commit        string  `json:"commit"`         // the branch's head
	ConfigHash    string  `json:"config_hash"`
	Cursor        int     `json:"cursor"`   // the next prompt of the dataset
	Tasks         int     `json:"tasks"`    // task calls that finished or were cached
	Cached        int     `json:"cached"`   // of which cache hits
	Attempts      int     `json:"attempts"` // attempts started
	Retries       int     `json:"retries"`
	Seconds       float64 `json:"seconds"`
	// StageSeconds is the mean time per call of each task that ran (not
	// cached), by task name: the iteration time breakdown.
	StageSeconds map[string]float64 `json:"stage_seconds"`
	// Planned is the number of iterations the config asks for.
	Planned int `json:"planned_iterations"`
}

// Run runs or resumes the loop of cfg's run on st to its last iteration,
// as `rlpipe run` does: it hands the engine the effective config
// (secrets redacted, with its hash), which the next committed iteration
// records at runs.ConfigPath, runs the loop, and returns what it did. Only one process runs a given run at a time: another gets an
// error that is pipeline.ErrRunLocked. A run that stops (an error, a
// cancelled ctx) resumes on the next call from its last committed
// iteration; finished tasks of the interrupted one are cache hits. The
// runs of the config's trackers end as the loop does: finished, failed,
// or killed when ctx was cancelled; a resumed run re-opens them.
func Run(ctx context.Context, st artifacts.Store, cfg *config.Config, o Options) (out Summary, err error) {
	start := time.Now()
	name := o.Name
	if name == "" {
		name = cfg.Run
	}
	if name == "" {
		return out, fmt.Errorf("driver: name the run with Options.Name or with run: in %s", cfg.File())
	}
	if err := artifacts.ValidateBranchName(runs.Branch(name)); err != nil {
		return out, fmt.Errorf("driver: run name %q: %w", name, err)
	}
	// A dataset the loop cannot sample is a config error, told before the
	// plan opens a policy or the run takes its lock.
	if err := cfg.CheckDataset(ctx, st); err != nil {
		return out, err
	}
	// So is a tracker that cannot work (wandb missing from its python).
	if err := checkTrackers(ctx, cfg, o.Logger); err != nil {
		return out, err
	}
	if cfg, err = keepStd(ctx, st, cfg, name, o.Logger); err != nil {
		return out, err
	}
	plan, err := cfg.Plan(ctx)
	if err != nil {
		return out, err
	}
	defer plan.Close()
	effective := *cfg
	effective.Run, effective.Store = name, ""
	body, err := effective.YAML()
	if err != nil {
		return out, err
	}
	body = append([]byte(fmt.Sprintf("# effective pipeline config of run %s, secrets redacted\n# config-hash: %s\n", name, plan.Run.ConfigHash)), body...)

	stats := &tally{}
	plan.Run.Name = name
	plan.Run.Config = body
	plan.Run.NoCache = o.NoCache
	plan.Run.Executor = o.Executor
	plan.Run.Logger = o.EventLogger
	plan.Run.OnEvent = func(e pipeline.Event) {
		stats.event(e)
		if o.OnEvent != nil {
			o.OnEvent(e)
		}
	}
	run, err := pipeline.Open(ctx, st, plan.Run)
	if errors.Is(err, pipeline.ErrRunLocked) {
		return out, err // the engine's message names the run and its holder
	}
	if err != nil {
		return out, withOp(err, "run", name)
	}
	defer func() {
		if cerr := run.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("run %s: %w", name, cerr)
		}
	}()
	if cur, err := artifacts.ReadObject(ctx, st, run.Branch(), runs.ConfigPath); err != nil {
		return out, fmt.Errorf("run %s: read %s: %w", name, runs.ConfigPath, err)
	} else if cur != nil && !bytes.Equal(cur, body) {
		changes, err := checkConfigChange(name, cur, body, o.AllowConfigChange)
		if err != nil {
			return out, err
		}
		if len(changes) > 0 {
			o.Logger.Warn().Str("run", run.Branch()).Msgf("the pipeline config differs from the run's recorded one: %s; the next committed iteration records the new one", joinChanges(changes))
		}
	}
	feed, err := openTrackers(ctx, st, &effective, plan.Run.ConfigHash, o)
	if err != nil {
		return out, err
	}
	// ended is how the trackers' runs end: failed unless the loop says
	// otherwise (a panic, an error after the loop).
	ended := trackers.Failed
	if feed != nil {
		defer func() {
			for _, d := range feed.Close(trackers.Outcome{Status: ended}) {
				switch {
				case d.Lost > 0:
					o.Logger.Warn().Str("run", name).Str("tracker", d.Name).Int("lost", d.Lost).
						Msgf("the tracker missed points of the run; back-fill it with: rlpipe track %s --to %s", name, d.Name)
				case !d.Ended:
					o.Logger.Warn().Str("run", name).Str("tracker", d.Name).Stringer("outcome", ended).
						Msgf("the tracker did not record how the run ended; rlpipe track %s --to %s records it", name, d.Name)
				}
			}
		}()
	}
	if o.OnCommit != nil || feed != nil {
		plan.Loop.OnCommit = func(n int) {
			if feed != nil {
				// The head is iteration n's commit until the loop goes on.
				if br, err := st.GetBranch(ctx, run.Branch()); err == nil {
					feed.Committed(n, br.CommitID)
				}
			}
			if o.OnCommit != nil {
				o.OnCommit(ctx, run.Branch(), n)
			}
		}
	}
	state, err := run.Loop(ctx, plan.Loop, plan.Stages)
	if err != nil {
		if ctx.Err() != nil {
			ended = trackers.Killed
			return out, &explained{msg: fmt.Sprintf("run %s: interrupted after iteration %d; run the same command again to resume", name, state.Iteration), err: err}
		}
		return out, fmt.Errorf("run %s: stopped after iteration %d: %w\nhint: fix the cause and run the same command again: it resumes, and finished tasks are cache hits", name, state.Iteration, err)
	}
	ended = trackers.Finished
	br, err := st.GetBranch(ctx, run.Branch())
	if err != nil {
		return out, withOp(err, "run", name)
	}
	stats.mu.Lock()
	defer stats.mu.Unlock()
	return Summary{Run: name, Branch: run.Branch(), Iterations: state.Iteration, NewIterations: stats.committed,
		Commit: br.CommitID, ConfigHash: plan.Run.ConfigHash, Cursor: state.Cursor,
		Tasks: stats.tasks, Cached: stats.cached, Attempts: stats.attempts, Retries: stats.retries,
		Seconds: time.Since(start).Round(time.Millisecond).Seconds(), StageSeconds: stats.breakdown(),
		Planned: plan.Loop.Iterations}, nil
}

// checkTrackers runs the plan-time check of each tracker of the config
// that has one (trackers.Checker), in order; the first failure names its
// tracking entry.
func checkTrackers(ctx context.Context, cfg *config.Config, log zerolog.Logger) error {
	for i, t := range cfg.Tracking {
		tr, err := cfg.Registry().Trackers.Open(t.Spec())
		if err != nil {
			return fmt.Errorf("%s: tracking[%d]: %w", cfg.File(), i, err)
		}
		if c, ok := tr.(trackers.Checker); ok {
			if err := c.Check(ctx, log); err != nil {
				return fmt.Errorf("%s: tracking[%d] (%s): %w", cfg.File(), i, t.Spec(), err)
			}
		}
	}
	return nil
}

// openTrackers starts feeding the config's trackers; nil without any.
// cfg names the run (Run).
func openTrackers(ctx context.Context, st artifacts.Store, cfg *config.Config, hash string, o Options) (*trackers.Feed, error) {
	if len(cfg.Tracking) == 0 {
		return nil, nil
	}
	name := cfg.Run
	r, err := TrackerRun(cfg, name, hash)
	if err != nil {
		return nil, err
	}
	var named []trackers.Named
	for _, t := range cfg.Tracking {
		tr, err := cfg.Registry().Trackers.Open(t.Spec())
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", name, err)
		}
		named = append(named, trackers.Named{Name: t.Spec().String(), Tracker: tr})
	}
	fo := trackers.FeedOptions{}
	if o.Trackers != nil {
		fo = *o.Trackers
	}
	fo.Logger = o.Logger
	return trackers.NewFeed(ctx, st, r, named, &fo), nil
}

// TrackerRun describes run name to its trackers: its effective config
// with every default filled in (config.Config.Effective, secrets
// redacted) under a header that names the run and the config's hash, as
// the live run's trackers and a back-fill (`rlpipe track`) both send it.
func TrackerRun(cfg *config.Config, name, hash string) (trackers.Run, error) {
	eff, err := cfg.Effective()
	if err != nil {
		return trackers.Run{}, fmt.Errorf("run %s: trackers: %w", name, err)
	}
	head := fmt.Sprintf("# effective pipeline config of run %s, defaults filled in, secrets redacted\n# config-hash: %s\n", name, hash)
	return trackers.NewRun(name, append([]byte(head), eff...), hash)
}

// tally counts a run's events.
type tally struct {
	mu                                          sync.Mutex
	tasks, cached, attempts, retries, committed int
	// stageTime and stageCalls sum the durations of finished calls by task.
	stageTime  map[string]time.Duration
	stageCalls map[string]int
}

func (s *tally) event(e pipeline.Event) {
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
		s.committed++
	}
}

// breakdown is the mean seconds per finished call of each task.
func (s *tally) breakdown() map[string]float64 {
	out := map[string]float64{}
	for name, d := range s.stageTime {
		out[name] = (d / time.Duration(s.stageCalls[name])).Round(time.Millisecond).Seconds()
	}
	return out
}

// withOp prefixes err with "OP NAME" ("run x", "eval x"), unless the
// store's message already names it ("run x: …", or "x: …" which reads
// "run x: …").
func withOp(err error, op, name string) error {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, op+" "+name):
		return err
	case strings.HasPrefix(msg, name+":"):
		return fmt.Errorf("%s %w", op, err)
	}
	return fmt.Errorf("%s %s: %w", op, name, err)
}

// explained is an error whose message replaces its cause's, which it
// keeps for errors.Is.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }
