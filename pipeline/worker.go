package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts"
)

// WorkerOptions configure a Worker.
type WorkerOptions struct {
	// Tasks are the tasks the worker can run, by Task.Name: the same
	// pipeline the driver planned (config.Plan's stages).
	Tasks []*Task
	// Envs are the task environments; a job's settings arrive resolved,
	// but the worker admits it under its own Machine.
	Envs map[string]Settings
	// Machine is what this worker hands out (default: this machine).
	Machine *Machine
	// ConfigHashes are the config hashes whose jobs the worker accepts:
	// the config it was built from, and variants that differ only in
	// what the driver alone reads (overlap). A job planned from another
	// config is refused. Empty: not checked.
	ConfigHashes []string
	// WorkDir holds task scratch directories (default: the OS temp dir).
	// NewWorker removes those that killed processes left there.
	WorkDir string
	// Logger receives task logs.
	Logger zerolog.Logger
}

// Worker runs single attempts of jobs a driver elsewhere planned: the
// other half of a remote executor. It reads inputs from and stages
// outputs on the job's branch of its store, which must be the driver's
// store (a lakeFS repository, or an embedded store served by `rlpipe
// store serve`). It keeps warm state (TaskContext.Warm: a loaded model, a
// built sandbox world) between jobs of an environment with reuse on, for
// as long as it lives.
type Worker struct {
	tasks map[string]*Task
	opts  WorkerOptions
	a     attempter
	pool  *pool
	warm  warmPools
}

// NewWorker builds a worker over st. Tasks must have distinct names.
func NewWorker(st artifacts.Store, opts WorkerOptions) (*Worker, error) {
	w := &Worker{tasks: map[string]*Task{}, opts: opts}
	for _, t := range opts.Tasks {
		if t == nil {
			continue
		}
		if err := t.validate(); err != nil {
			return nil, err
		}
		if prev, ok := w.tasks[t.Name]; ok && prev != t {
			return nil, fmt.Errorf("%w: two tasks are named %s", ErrConfig, t.Name)
		}
		w.tasks[t.Name] = t
	}
	m := opts.Machine
	if m == nil {
		this := ThisMachine()
		m = &this
	}
	w.pool = newPool(*m)
	events := newEventLog("", opts.Logger)
	// A worker's store is the driver's, remote to it: its attempts keep
	// local copies of what they put and read (objectCache).
	w.a = attempter{store: st, memo: &memoizer{store: st, events: events}, workDir: opts.WorkDir, log: opts.Logger, objects: newObjectCache(opts.WorkDir)}
	sweepTaskDirs(opts.WorkDir, opts.Logger)
	return w, nil
}

// Close removes the worker's local copies of objects; call it when the
// worker serves no more attempts.
func (w *Worker) Close() { w.a.objects.close() }

// Tasks lists the names of the tasks the worker runs, sorted.
func (w *Worker) Tasks() []string {
	names := make([]string, 0, len(w.tasks))
	for n := range w.tasks {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Attempt runs attempt number attempt (from 1) of job once: it waits
// for the job's resources on this worker's machine, downloads the
// inputs, runs the task under the job's per-attempt timeout, checks and
// uploads the outputs to the job's branch, and returns them. Errors
// marked Permanent (ErrPermanent) are not worth retrying anywhere.
func (w *Worker) Attempt(ctx context.Context, job Job, attempt int) (map[string]Artifact, error) {
	return w.attempt(ctx, job, attempt, true)
}

// TryAttempt is Attempt without the wait: when the job's resources or
// its environment's concurrency are taken on this worker now, it returns
// ErrBusy at once, so that the caller can hand the attempt to whichever
// worker is free.
func (w *Worker) TryAttempt(ctx context.Context, job Job, attempt int) (map[string]Artifact, error) {
	return w.attempt(ctx, job, attempt, false)
}

func (w *Worker) attempt(ctx context.Context, job Job, attempt int, wait bool) (map[string]Artifact, error) {
	t, ok := w.tasks[job.Task]
	if !ok {
		return nil, Permanent(fmt.Errorf("%w: this worker has no task %q (it has %s); start it from the driver's pipeline config", ErrConfig, job.Task, strings.Join(w.Tasks(), ", ")))
	}
	if t.Version != job.Version {
		return nil, Permanent(fmt.Errorf("%w: task %s is version %q here but the driver planned version %q; run workers from the same pipeline and rlpipe build as the driver", ErrConfig, job.Task, t.Version, job.Version))
	}
	if hs := w.opts.ConfigHashes; len(hs) > 0 && job.ConfigHash != "" && !slices.Contains(hs, job.ConfigHash) {
		return nil, Permanent(fmt.Errorf("%w: this worker was started from config %s but the driver runs config %s; restart the worker with the driver's pipeline config", ErrConfig, short(hs[0]), short(job.ConfigHash)))
	}
	if err := job.Settings.Validate(); err != nil {
		return nil, Permanent(fmt.Errorf("task %s: %w", job.Call, err))
	}
	release, err := w.pool.admit(ctx, job.Env, job.Settings, wait)
	if err != nil {
		if errors.Is(err, ErrUnschedulable) {
			return nil, Permanent(fmt.Errorf("environment %q on this worker: %w", job.Env, err))
		}
		return nil, err
	}
	defer release()
	var slot *warmSlot
	if job.Settings.reuse() {
		wp := w.warm.env(job.Env)
		slot = wp.get()
		defer wp.put(slot)
	}
	return w.a.attempt(ctx, t, &job, attempt, slot)
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
