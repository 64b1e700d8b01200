package temporalrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/rs/zerolog"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/rlpipe/rlpipe/pipeline"
)

// Names of the workflows and activities, as registered on workers.
const (
	TaskWorkflow = "rlpipe.task"
	// TaskFastWorkflow is the task workflow when its first attempt runs
	// inside its workflow task (TaskInput.Local): a type of its own, so
	// that a worker of an rlpipe without the fast path never takes or
	// replays one.
	TaskFastWorkflow = "rlpipe.task.fast"
	AttemptAction    = "rlpipe.attempt"
	RunWorkflow      = "rlpipe.run"
	DriveAction      = "rlpipe.drive"
	// CancelTasksAction cancels a cancelled run's open tasks.
	CancelTasksAction = "rlpipe.cancel-tasks"
)

// Error types an attempt reports to the task workflow.
const (
	errPermanent = "rlpipe.Permanent"
	errTimeout   = "rlpipe.Timeout"
	errTask      = "rlpipe.TaskError"
	// errStopped: the worker was stopping (Ctrl-C, a deploy); like a
	// lost attempt, it does not count against retries.
	errStopped = "rlpipe.WorkerStopped"
	// errBusy: an attempt on the fast path found no room on the worker
	// running the workflow task; it goes to the queue instead.
	errBusy = "rlpipe.WorkerBusy"
)

// TaskInput is what a task workflow carries: the job (references and
// digests only) and how long a worker may go silent before its attempt
// counts as lost.
type TaskInput struct {
	Job pipeline.Job `json:"job"`
	// Queue is the task queue of the job's environment (Queue).
	Queue     string        `json:"queue"`
	Heartbeat time.Duration `json:"heartbeat_ns"`
	// MaxLost caps attempts lost with their worker (heartbeat timeouts),
	// which do not count against the task's retries.
	MaxLost int `json:"max_lost"`
	// Local, when set, runs the first attempt inside the workflow task,
	// as a local activity of the worker that takes it, bounded to Local:
	// the fast path for a call known to be short (see Executor). Any
	// attempt after the first is a regular activity.
	Local time.Duration `json:"local_ns,omitempty"`
}

// TaskResult is a task workflow's result. A task that failed is a
// result with Error set, not a failed workflow: the driver turns it into
// the same *pipeline.TaskError the local executor returns.
type TaskResult struct {
	Outputs  map[string]pipeline.Artifact `json:"outputs,omitempty"`
	Attempts int                          `json:"attempts"`
	// Lost counts attempts whose worker stopped heartbeating (it died);
	// they were run again on another worker.
	Lost    int           `json:"lost,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// Errors are the failed attempts' errors, in order; Error the final
	// one when the task failed, Permanent when it was not retryable.
	Errors    []string `json:"errors,omitempty"`
	Error     string   `json:"error,omitempty"`
	Permanent bool     `json:"permanent,omitempty"`
	Deadline  bool     `json:"deadline,omitempty"`
	// Kinds name the engine's errors the final error matched on its
	// worker (see errorKinds), so that the driver's error matches them
	// too.
	Kinds []string `json:"kinds,omitempty"`
	// Workers names the worker that ran each attempt that reported back.
	Workers []string `json:"workers,omitempty"`
	// Fast: the task's workflow and its successful attempt ran on
	// workers that take the fast path (TaskFastWorkflow); Overran: the
	// attempt on the fast path ran past its bound.
	Fast    bool `json:"fast,omitempty"`
	Overran bool `json:"overran,omitempty"`
}

// attemptResult is what one attempt activity returns.
type attemptResult struct {
	Outputs map[string]pipeline.Artifact `json:"outputs"`
	Worker  string                       `json:"worker"`
	Elapsed time.Duration                `json:"elapsed_ns"`
	// Fast: the worker runs attempts on the fast path.
	Fast bool `json:"fast,omitempty"`
}

// taskWorkflow runs a job's attempts on its environment's queue with the
// local executor's retry semantics: a failed attempt counts against
// retries.attempts and waits retries' backoff (a durable timer); an
// attempt whose worker died (no heartbeat) is re-run elsewhere without
// counting; a permanent error stops at once; the deadline bounds all of
// it. Cancelling the workflow cancels the running attempt.
func taskWorkflow(ctx workflow.Context, in TaskInput) (TaskResult, error) {
	s := in.Job.Settings
	var res TaskResult
	start := workflow.Now(ctx)
	var deadline time.Time
	if s.Deadline > 0 {
		deadline = start.Add(s.Deadline)
	}
	hb := in.Heartbeat
	if hb <= 0 {
		hb = DefaultHeartbeat
	}
	maxLost := in.MaxLost
	if maxLost <= 0 {
		maxLost = DefaultMaxLost
	}
	failed := 0
	local := in.Local > 0 && workflow.GetInfo(ctx).WorkflowType.Name == TaskFastWorkflow
	if local && workflow.GetInfo(ctx).GetCurrentHistoryLength() > firstTaskStarted {
		// The workflow task that ran the first attempt timed out or
		// failed: its worker died or was cut off, and the attempt is
		// lost with it.
		local = false
		res.Attempts, res.Lost = 1, 1
		res.Errors = append(res.Errors, fmt.Sprintf("attempt 1 lost: its workflow task timed out or failed (a worker died or was cut off for %s, or one without the fast path took it)", workflow.GetInfo(ctx).WorkflowTaskTimeout))
	}
	for {
		// A backstop over the worker's own per-attempt timeout, which
		// kills the task's processes first.
		stc := 30 * 24 * time.Hour
		if s.Timeout > 0 {
			stc = s.Timeout + time.Minute
		}
		opts := workflow.ActivityOptions{
			TaskQueue:           in.Queue,
			StartToCloseTimeout: stc,
			HeartbeatTimeout:    hb,
			RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
			WaitForCancellation: true,
		}
		if !deadline.IsZero() {
			left := deadline.Sub(workflow.Now(ctx))
			if left <= 0 {
				return deadlineResult(res, s, "before the next attempt"), nil
			}
			opts.ScheduleToCloseTimeout = left
			if opts.StartToCloseTimeout > left {
				opts.StartToCloseTimeout = left
			}
		}
		var ar attemptResult
		var kinds []string // the attempt's, when it failed on its worker
		attempt := res.Attempts + 1
		var err error
		if local {
			local = false
			// Queued and run within the bound, so that the workflow task
			// never outlives its timeout and needs no heartbeat.
			lopts := workflow.LocalActivityOptions{
				StartToCloseTimeout:    min(opts.StartToCloseTimeout, in.Local),
				ScheduleToCloseTimeout: in.Local,
				RetryPolicy:            opts.RetryPolicy,
			}
			if opts.ScheduleToCloseTimeout > 0 {
				lopts.ScheduleToCloseTimeout = min(opts.ScheduleToCloseTimeout, in.Local)
			}
			err = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, lopts), AttemptAction, in.Job, attempt).Get(ctx, &ar)
			var ae *temporal.ApplicationError
			if errors.As(err, &ae) && ae.Type() == errBusy {
				continue // not an attempt: it goes to the queue
			}
			var te *temporal.TimeoutError
			if errors.As(err, &te) && (deadline.IsZero() || workflow.Now(ctx).Before(deadline)) {
				// Longer than the fast path allows: run it again as a
				// regular attempt, not counted against retries.
				res.Attempts, res.Overran = attempt, true
				res.Errors = append(res.Errors, fmt.Sprintf("attempt %d ran past %s, the bound of an attempt run inside its workflow task, and was cancelled; it runs again as a regular attempt", attempt, in.Local))
				continue
			}
		} else {
			err = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), AttemptAction, in.Job, attempt).Get(ctx, &ar)
		}
		res.Attempts = attempt
		if err == nil {
			res.Outputs, res.Elapsed = ar.Outputs, res.Elapsed+ar.Elapsed
			res.Workers = append(res.Workers, ar.Worker)
			res.Fast = ar.Fast
			return res, nil
		}
		if temporal.IsCanceledError(err) || ctx.Err() != nil {
			return res, err
		}
		var te *temporal.TimeoutError
		var ae *temporal.ApplicationError
		stopped := errors.As(err, &ae) && ae.Type() == errStopped
		switch {
		case stopped || errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT:
			res.Lost++
			if stopped {
				res.Errors = append(res.Errors, fmt.Sprintf("attempt %d lost: %s", attempt, ae.Message()))
			} else {
				res.Errors = append(res.Errors, fmt.Sprintf("attempt %d lost: its worker stopped heartbeating for %s (it died or was cut off)", attempt, hb))
			}
			if res.Lost > maxLost {
				res.Error = fmt.Sprintf("%d attempts lost with their workers (max %d): %s", res.Lost, maxLost, res.Errors[len(res.Errors)-1])
				return res, nil
			}
			continue // another worker takes it; not a failure of the task
		case errors.As(err, &te) && (te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE || !deadline.IsZero() && !workflow.Now(ctx).Before(deadline)):
			return deadlineResult(res, s, "while attempt "+fmt.Sprint(attempt)+" ran"), nil
		case errors.As(err, &ae):
			msg := ae.Message()
			res.Errors = append(res.Errors, msg)
			if ae.HasDetails() {
				_ = ae.Details(&kinds)
			}
			if ae.Type() == errPermanent {
				res.Error, res.Permanent, res.Kinds = msg, true, kinds
				return res, nil
			}
		default:
			res.Errors = append(res.Errors, err.Error())
		}
		failed++
		if failed >= s.Retry.Attempts {
			res.Error, res.Kinds = res.Errors[len(res.Errors)-1], kinds
			return res, nil
		}
		wait := s.Retry.Wait(failed)
		if !deadline.IsZero() && workflow.Now(ctx).Add(wait).After(deadline) {
			return deadlineResult(res, s, "while waiting to retry"), nil
		}
		if err := workflow.Sleep(ctx, wait); err != nil {
			return res, err
		}
	}
}

// firstTaskStarted is the id of the event that starts a workflow's first
// workflow task: a larger history length when the task workflow's code
// first runs means an earlier workflow task timed out.
const firstTaskStarted = 3

func deadlineResult(res TaskResult, s pipeline.Settings, when string) TaskResult {
	last := "no attempt finished"
	if n := len(res.Errors); n > 0 {
		last = "last error: " + res.Errors[n-1]
	}
	res.Deadline = true
	res.Error = fmt.Sprintf("%v (%s over all attempts) %s; %s", pipeline.ErrDeadline, s.Deadline, when, last)
	return res
}

// attempts is the activity side: one attempt of a job on this worker.
type attempts struct {
	w    *pipeline.Worker
	name string
	log  zerolog.Logger
	// slots holds one token per attempt running in this environment,
	// regular or on the fast path: the environment's Concurrency.
	slots chan struct{}
}

// Attempt runs one attempt, heartbeating while it runs so that the task
// workflow notices a dead worker and so that a cancellation reaches the
// task (its context is cancelled and its processes killed).
func (a *attempts) Attempt(ctx context.Context, job pipeline.Job, attempt int) (attemptResult, error) {
	info := activity.GetInfo(ctx)
	busy := func(why error) error {
		return temporal.NewApplicationErrorWithOptions(fmt.Sprintf("worker %s: %v", a.name, why), errBusy, temporal.ApplicationErrorOptions{NonRetryable: true})
	}
	every := info.HeartbeatTimeout / 3
	if every <= 0 || every > 10*time.Second {
		every = 10 * time.Second
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		if info.IsLocalActivity {
			return // its workflow task's timeout watches the worker instead
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, attempt)
			}
		}
	}()
	// No heartbeat at the start: the heartbeat timeout runs from the
	// attempt's start, and a first heartbeat would cost the server a
	// write per task call for nothing.

	// An attempt on the fast path does not wait for a slot: with none
	// free it goes to the queue, for whichever worker has one. A regular
	// attempt waits, heartbeating.
	if info.IsLocalActivity {
		select {
		case a.slots <- struct{}{}:
		default:
			return attemptResult{}, busy(pipeline.ErrBusy)
		}
	} else {
		select {
		case a.slots <- struct{}{}:
		case <-ctx.Done():
			return attemptResult{}, ctx.Err()
		}
	}
	defer func() { <-a.slots }()
	log := a.log.With().Str("run", job.Run).Int("iteration", job.Iteration).Str("task", job.Call).Int("attempt", attempt).Str("env", job.Env).Logger()
	log.Info().Msg("attempt started")
	// A stopping worker cancels the attempt at once and says so, so that
	// the workflow runs it elsewhere without counting it as a failure.
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopping := activity.GetWorkerStopChannel(ctx)
	go func() {
		select {
		case <-stopping:
			cancel()
		case <-actx.Done():
		}
	}()
	run := a.w.Attempt
	if info.IsLocalActivity {
		run = a.w.TryAttempt
	}
	start := time.Now()
	outs, err := run(actx, job, attempt)
	elapsed := time.Since(start)
	if errors.Is(err, pipeline.ErrBusy) {
		log.Info().Msg("no room for the attempt on this worker now: it goes to the queue")
		return attemptResult{}, busy(err)
	}
	if err != nil {
		log.Warn().Err(err).Dur("duration", elapsed).Msg("attempt failed")
		select {
		case <-stopping:
			return attemptResult{}, temporal.NewApplicationErrorWithOptions(fmt.Sprintf("worker %s stopped during the attempt", a.name), errStopped, temporal.ApplicationErrorOptions{NonRetryable: true})
		default:
		}
		if ctx.Err() != nil {
			return attemptResult{}, ctx.Err()
		}
		typ := errTask
		switch {
		case errors.Is(err, pipeline.ErrPermanent):
			typ = errPermanent
		case errors.Is(err, pipeline.ErrTimeout):
			typ = errTimeout
		}
		return attemptResult{}, temporal.NewApplicationErrorWithOptions(fmt.Sprintf("on worker %s: %v", a.name, err), typ,
			temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{kindsOf(err)}})
	}
	log.Info().Dur("duration", elapsed).Msg("attempt finished")
	return attemptResult{Outputs: outs, Worker: a.name, Elapsed: elapsed, Fast: true}, nil
}

// workerName names this process in results and errors: host and pid.
func workerName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// errorKinds are the engine's named errors an attempt's failure may
// match, by the name that travels with it (the attempt error's details):
// the driver rebuilds an error that matches them as the worker's did.
// ErrPermanent travels as the error's type, and ErrDeadline is the task
// workflow's own verdict.
var errorKinds = []struct {
	name string
	err  error
}{
	{"timeout", pipeline.ErrTimeout},
	{"output", pipeline.ErrOutput},
	{"config", pipeline.ErrConfig},
	{"unschedulable", pipeline.ErrUnschedulable},
}

// kindsOf names the errorKinds err matches.
func kindsOf(err error) []string {
	var names []string
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			names = append(names, k.name)
		}
	}
	return names
}

// remoteError is an attempt's error as its worker reported it: the
// message, matching the named errors (errorKinds) it matched there.
type remoteError struct {
	msg   string
	kinds []string
}

func (e remoteError) Error() string { return e.msg }

func (e remoteError) Unwrap() []error {
	var errs []error
	for _, k := range errorKinds {
		if slices.Contains(e.kinds, k.name) {
			errs = append(errs, k.err)
		}
	}
	return errs
}
