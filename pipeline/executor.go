package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Job is a task call as it travels to an executor: the names, settings,
// seed and parameters of the call and references to its inputs (store
// refs, paths and checksums), never their bytes. An executor on another
// machine runs it with a Worker that opened the same store and the same
// pipeline.
type Job struct {
	// Run is the run's name; Branch the branch outputs are staged on.
	Run    string `json:"run"`
	Branch string `json:"branch"`
	// Task and Version name the task (Task.Name, Task.Version); Call is
	// the call's name in its iteration (Call.Name, default Task).
	Task    string `json:"task"`
	Version string `json:"version,omitempty"`
	Call    string `json:"call"`
	// Env is the task environment: on Temporal, the task queue.
	Env       string `json:"env,omitempty"`
	Group     string `json:"group,omitempty"`
	Iteration int    `json:"iteration"`
	// Key is the call's cache key; Seed its seed (0 for a Deterministic task).
	Key  string `json:"key"`
	Seed uint64 `json:"seed"`
	// Dir is where the outputs go on Branch.
	Dir    string              `json:"dir"`
	Inputs map[string]Artifact `json:"inputs,omitempty"`
	Params json.RawMessage     `json:"params,omitempty"`
	// Settings are the call's resolved settings (environment → task → call).
	Settings Settings `json:"settings"`
	// ConfigHash is the pipeline config the driver planned with; a worker
	// built from another config refuses the job.
	ConfigHash string `json:"config_hash,omitempty"`
}

// Outcome is what an executor reports for a call that finished.
type Outcome struct {
	Outputs  map[string]Artifact `json:"outputs"`
	Attempts int                 `json:"attempts"`
	// Elapsed sums the attempts' running times.
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Executor runs the attempts of one task call — retries, per-attempt
// timeouts and the deadline over all of them — and returns the outputs
// it staged on the job's branch. The engine has already consulted the
// cache and records the outcome in it. report receives the call's
// events (started, retried, finished, failed); a failure is a
// *TaskError carrying the number of attempts.
//
// The local executor (RunOptions.Executor nil) runs attempts in this
// process under the machine's resources; package pipeline/temporalrun
// dispatches them to workers on Temporal.
type Executor interface {
	Execute(ctx context.Context, t *Task, job Job, report func(Event)) (Outcome, error)
}

// localExecutor runs attempts in this process, admitted by the run's
// resource pool, with the run's warm workers.
type localExecutor struct{ r *Run }

func (x localExecutor) Execute(ctx context.Context, t *Task, job Job, report func(Event)) (Outcome, error) {
	r := x.r
	s := job.Settings
	var out Outcome
	fail := func(attempts int, err error) (Outcome, error) {
		return out, &TaskError{Task: job.Call, Group: job.Group, Attempts: attempts, Err: err}
	}
	release, err := r.pool.acquire(ctx, job.Env, s)
	if err != nil {
		if errors.Is(err, ErrUnschedulable) {
			return fail(0, fmt.Errorf("environment %q: %w", job.Env, err))
		}
		return out, err
	}
	var slot *warmSlot
	var wp *warmPool
	if s.reuse() {
		wp = r.warm.env(job.Env)
		slot = wp.get()
	}
	// done frees the task's resources and warm worker; the cache record
	// written after success does not need them, so it does not hold up
	// the next task.
	done := func() {
		release()
		if slot != nil {
			wp.put(slot)
			slot = nil
		}
	}
	defer done()
	dctx, cancel := withLimit(ctx, s.Deadline)
	defer cancel()
	ev := job.Event()
	for attempt := 1; ; attempt++ {
		start := time.Now()
		e := ev
		e.Kind, e.Attempt, e.Resources = EventStarted, attempt, &s.Resources
		report(e)
		outs, err := r.attempter().attempt(dctx, t, &job, attempt, slot)
		e.Duration = time.Since(start)
		out.Attempts, out.Elapsed = attempt, out.Elapsed+e.Duration
		e.Resources = nil
		if err == nil {
			done()
			out.Outputs = outs
			e.Kind = EventFinished
			report(e)
			return out, nil
		}
		switch {
		case ctx.Err() != nil: // the run is cancelled: no retry, no record
			return out, ctx.Err()
		case dctx.Err() != nil:
			err = fmt.Errorf("%w (%s over all attempts): %v", ErrDeadline, s.Deadline, err)
		}
		e.Error = err.Error()
		if errors.Is(err, ErrPermanent) || errors.Is(err, ErrDeadline) || attempt >= s.Retry.Attempts {
			e.Kind = EventFailed
			report(e)
			return fail(attempt, err)
		}
		e.Kind = EventRetried
		report(e)
		select {
		case <-time.After(s.Retry.Wait(attempt)):
		case <-dctx.Done():
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			e.Kind, e.Error = EventFailed, fmt.Sprintf("%v (%s over all attempts) while waiting to retry: %v", ErrDeadline, s.Deadline, err)
			report(e)
			return fail(attempt, fmt.Errorf("%w (%s over all attempts): last error: %v", ErrDeadline, s.Deadline, err))
		}
	}
}

// Event is the template of the job's events: an executor sets the kind,
// attempt, duration and error.
func (job Job) Event() Event {
	return Event{Group: job.Group, Stage: job.Task, Iteration: job.Iteration, Task: job.Call, Env: job.Env, Key: job.Key}
}
