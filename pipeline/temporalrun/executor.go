package temporalrun

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/pipeline"
)

// Defaults.
const (
	// DefaultAddress is the Temporal frontend of a local dev server.
	DefaultAddress = "127.0.0.1:7233"
	// DefaultNamespace is Temporal's default namespace.
	DefaultNamespace = "default"
	// DefaultHeartbeat is how long a worker may go silent before its
	// attempt (or the driver) counts as lost and runs elsewhere.
	DefaultHeartbeat = 30 * time.Second
	// DefaultMaxLost caps the attempts of one task lost with their workers.
	DefaultMaxLost = 5
)

// Queue is the task queue of environment env of a pipeline in
// repository repo: every worker started from that pipeline for env polls
// it, and workers of other pipelines sharing the repository never see
// its jobs. pipeline identifies the pipeline's tasks (the CLI uses a
// short hash of its config without the driver's own knobs). Tasks
// without an environment go to env "default".
func Queue(repo, pipeline, env string) string {
	if env == "" {
		env = "default"
	}
	return "rlpipe/" + repo + "/" + pipeline + "/" + env
}

// DriverQueue is the queue of driver workers, which run the loop.
func DriverQueue(repo string) string { return "rlpipe/" + repo + "#driver" }

// TaskID is the workflow id of a task call: stable across driver
// restarts (a new driver attaches to the running or finished workflow
// instead of starting the task again) and unique per repository, branch,
// output directory, call and cache key.
func TaskID(repo string, job pipeline.Job) string {
	key := job.Key
	if len(key) > 24 {
		key = key[:24]
	}
	return fmt.Sprintf("rlpipe/%s/%s/%s/%s/%s", repo, job.Branch, job.Dir, job.Call, key)
}

// ErrDetached is the cause of a context cancelled because its driver is
// stopping (not because the run was cancelled): the executor leaves the
// running tasks alone for the next driver to attach to.
var ErrDetached = errors.New("driver detached; the run goes on on Temporal")

// ExecutorOptions configure an Executor.
type ExecutorOptions struct {
	// Client is a connected Temporal client.
	Client client.Client
	// Repository is the store's repository name; it scopes queues and
	// workflow ids so that two repositories can share a namespace.
	Repository string
	// Pipeline identifies the pipeline's tasks in queue names (Queue).
	Pipeline string
	// Store, when set, is checked when the executor attaches to a task
	// workflow that finished before (a restarted driver): outputs that
	// are no longer staged with their checksums are produced again.
	Store artifacts.Store
	// Heartbeat is the workers' heartbeat timeout (default DefaultHeartbeat).
	Heartbeat time.Duration
	// MaxLost caps attempts lost with their workers (default DefaultMaxLost).
	MaxLost int
	// Logger receives the executor's own log lines; a queue no worker
	// polls is a task.waiting event instead.
	Logger zerolog.Logger
}

// Executor is a pipeline.Executor that runs each task call as a Temporal
// workflow on the queue of the call's environment, where `rlpipe worker
// --env NAME` processes run its attempts. Only the job — references,
// digests, settings — travels through Temporal; inputs and outputs move
// between the workers and the store.
type Executor struct {
	o      ExecutorOptions
	warned sync.Map // queue → struct{}
	// took holds how long the last attempt of each task (queue and task
	// name) ran, for the fast path (fastPath).
	took sync.Map
}

// taskTimeout is the workflow-task timeout of a task workflow whose first
// attempt runs inside its workflow task: how long a worker may go silent
// before that attempt counts as lost, as the heartbeat timeout is for a
// regular attempt (Temporal's default, and at most the heartbeat).
func (x *Executor) taskTimeout() time.Duration { return min(x.o.Heartbeat, 10*time.Second) }

// fastPath is the bound of the first attempt of t's call when it may run
// inside its workflow task (TaskInput.Local), or 0. A task workflow whose
// attempt is a regular activity costs the server a second workflow task
// and the activity's dispatch and completion, and the worker two round
// trips more: on the demo the fast path halves the server's work. A
// local activity cannot heartbeat, so a dead worker is noticed by the
// workflow task's timeout instead, and a cancellation waits for the
// attempt: only a task whose
// last attempt took under half the bound, itself half the workflow
// task's timeout, takes the fast path; one that runs past the bound runs
// again as a regular attempt.
func (x *Executor) fastPath(queue string, t *pipeline.Task) time.Duration {
	bound := x.taskTimeout() / 2
	if d, ok := x.took.Load(tookKey(queue, t)); ok && d.(time.Duration) < bound/2 {
		return bound
	}
	return 0
}

// tookKey keys took: a task's calls on one queue.
func tookKey(queue string, t *pipeline.Task) string { return queue + "\x00" + t.Name }

// NewExecutor returns an executor over a connected client.
func NewExecutor(o ExecutorOptions) (*Executor, error) {
	if o.Client == nil || o.Repository == "" || o.Pipeline == "" {
		return nil, fmt.Errorf("%w: the Temporal executor needs a client, the store's repository name and the pipeline's id", pipeline.ErrConfig)
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.MaxLost <= 0 {
		o.MaxLost = DefaultMaxLost
	}
	return &Executor{o: o}, nil
}

// Execute runs the job's attempts through a task workflow and waits for
// it. If ctx is cancelled the workflow is cancelled too (its running
// attempt is killed on its worker), unless the cause is ErrDetached.
func (x *Executor) Execute(ctx context.Context, t *pipeline.Task, job pipeline.Job, report func(pipeline.Event)) (pipeline.Outcome, error) {
	queue := Queue(x.o.Repository, x.o.Pipeline, job.Env)
	ev := job.Event()
	e := ev
	e.Kind, e.Attempt, e.Resources = pipeline.EventStarted, 1, &job.Settings.Resources
	report(e)
	if msg := x.unserved(ctx, queue, job.Env); msg != "" {
		w := ev
		w.Kind, w.Error = pipeline.EventWaiting, msg
		report(w)
	}
	in := TaskInput{Job: job, Queue: queue, Heartbeat: x.o.Heartbeat, MaxLost: x.o.MaxLost, Local: x.fastPath(queue, t)}
	id := TaskID(x.o.Repository, job)
	reuse := enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY
	if job.Settings.Cache.Mode == pipeline.CacheDisable {
		reuse = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	}
	res, earlier, err := x.run(ctx, id, queue, in, reuse)
	if err == nil && earlier && (res.Error != "" || !x.staged(ctx, job, res.Outputs)) {
		// A workflow that finished before this driver asked — for an
		// earlier driver of the run, or an earlier invocation — but failed
		// (the cause may be fixed now) or whose outputs are gone from the
		// branch: run the task again.
		res, _, err = x.run(ctx, id, queue, in, enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE)
	}
	if err != nil {
		return pipeline.Outcome{}, err
	}
	// The fast path is learnt from calls that ran on workers that have it,
	// and dropped for a task whose attempt ran past its bound.
	switch key := tookKey(queue, t); {
	case res.Overran:
		x.took.Delete(key)
	case res.Error == "" && res.Fast:
		x.took.Store(key, res.Elapsed)
	}
	out := pipeline.Outcome{Outputs: res.Outputs, Attempts: res.Attempts, Elapsed: res.Elapsed}
	// Errors holds an entry per attempt that reported back, and each was
	// retried but the one that ended a failed task. An attempt the
	// deadline cut short reported nothing: then every entry was retried.
	errs := res.Errors
	if res.Error != "" && len(errs) > 0 && len(errs) == res.Attempts {
		errs = errs[:len(errs)-1]
	}
	for i, msg := range errs {
		r := ev
		r.Kind, r.Attempt, r.Error = pipeline.EventRetried, i+1, msg
		report(r)
	}
	e = ev
	e.Attempt, e.Duration = res.Attempts, res.Elapsed
	if res.Error == "" {
		e.Kind = pipeline.EventFinished
		if n := len(res.Workers); n > 0 {
			e.Worker = res.Workers[n-1]
		}
		report(e)
		return out, nil
	}
	e.Kind, e.Error = pipeline.EventFailed, res.Error
	report(e)
	var cause error = remoteError{msg: res.Error, kinds: res.Kinds}
	switch {
	case res.Permanent:
		cause = pipeline.Permanent(cause)
	case res.Deadline:
		cause = fmt.Errorf("%w%s", pipeline.ErrDeadline, strings.TrimPrefix(res.Error, pipeline.ErrDeadline.Error()))
	}
	return out, &pipeline.TaskError{Task: job.Call, Group: job.Group, Attempts: res.Attempts, Err: cause}
}

// run starts the task workflow, or attaches to it when it is running,
// and waits for its result. earlier reports a workflow that had finished
// before this call (the reuse policy kept it from starting again).
func (x *Executor) run(ctx context.Context, id, queue string, in TaskInput, reuse enumspb.WorkflowIdReusePolicy) (res TaskResult, earlier bool, err error) {
	opts := client.StartWorkflowOptions{
		ID: id, TaskQueue: queue,
		WorkflowIDReusePolicy:    reuse,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		// A closed workflow the policy does not start again is an error
		// here, so that it is told apart from a running one.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}
	typ := TaskWorkflow
	if in.Local > 0 {
		typ, opts.WorkflowTaskTimeout = TaskFastWorkflow, x.taskTimeout()
	}
	run, err := x.o.Client.ExecuteWorkflow(ctx, opts, typ, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case err == nil:
	case errors.As(err, &started):
		run, earlier = x.o.Client.GetWorkflow(ctx, id, started.RunId), true
	case ctx.Err() != nil:
		return res, false, ctx.Err()
	default:
		return res, false, fmt.Errorf("start task %s on Temporal (queue %s): %w", in.Job.Call, queue, err)
	}
	err = Result(ctx, x.o.Client, run, &res)
	if ctx.Err() != nil {
		if !errors.Is(context.Cause(ctx), ErrDetached) {
			// The run was cancelled: so is the task, on its worker.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = x.o.Client.CancelWorkflow(cctx, id, run.GetRunID())
		}
		return res, earlier, ctx.Err()
	}
	if err != nil {
		return res, earlier, fmt.Errorf("task %s (workflow %s): %w", in.Job.Call, id, err)
	}
	return res, earlier, nil
}

// staged reports whether outputs are on the job's branch with their
// checksums (always true without a store to check).
func (x *Executor) staged(ctx context.Context, job pipeline.Job, outs map[string]pipeline.Artifact) bool {
	if x.o.Store == nil {
		return true
	}
	names := make([]string, 0, len(outs))
	for n := range outs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a := outs[n]
		files := map[string]string{a.Path: a.Checksum}
		if a.Dir {
			files = map[string]string{}
			for rel, sum := range a.Files {
				files[a.Path+"/"+rel] = sum
			}
		}
		for p, sum := range files {
			info, err := x.o.Store.StatObject(ctx, job.Branch, p)
			if err != nil || info.Checksum != sum {
				return false
			}
		}
	}
	return true
}

// unserved returns, once per queue, why a task waits when no worker
// polls its queue, for the task's task.waiting event (which the run logs
// as a warning and its display keeps on screen): the task waits until a
// worker comes. It returns "" when a worker polls the queue, for a queue
// already checked, and when the check itself fails.
func (x *Executor) unserved(ctx context.Context, queue, env string) string {
	if _, done := x.warned.LoadOrStore(queue, struct{}{}); done {
		return ""
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := x.o.Client.DescribeTaskQueue(dctx, queue, enumspb.TASK_QUEUE_TYPE_ACTIVITY)
	if err != nil || len(resp.GetPollers()) > 0 {
		return ""
	}
	if env == "" {
		env = "default"
	}
	return fmt.Sprintf("no worker serves environment %s of this pipeline yet: its tasks wait on queue %s until one does (start `rlpipe worker --env %s` with the same pipeline config and store)", env, queue, env)
}

// Result waits for run to close and decodes its result into valuePtr,
// as run.Get does, without run.Get's wait. That wait is one long poll
// for the close event, and the history service keeps one pending
// notification per poll and drops the rest: when a workflow's last
// events follow each other within milliseconds (a short task), the
// close event's notification can be the one dropped, and the poll then
// sleeps until it expires, 20 s later (measured: about one task call in
// forty on `rlpipe temporal dev`). Result instead follows every event
// of the run's history, each poll returning at the next one, which
// loses nothing; once the history has closed it decodes a completed
// run's result from its last event, and leaves anything else (a failure,
// a continued or cron run) to run.Get.
func Result(ctx context.Context, c client.Client, run client.WorkflowRun, valuePtr any) error {
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			break // run.Get says what went wrong
		}
		// A completed run's result is in its last event: decoded here, it
		// saves the round trip of run.Get. rlpipe's clients use the
		// default data converter; a cron run's next run is run.Get's to
		// follow, as is a result nobody wants.
		if done := ev.GetWorkflowExecutionCompletedEventAttributes(); done != nil && done.GetNewExecutionRunId() == "" && valuePtr != nil && !it.HasNext() {
			if r := done.GetResult(); r != nil {
				return converter.GetDefaultDataConverter().FromPayloads(r, valuePtr)
			}
			return nil
		}
	}
	return run.Get(ctx, valuePtr)
}
