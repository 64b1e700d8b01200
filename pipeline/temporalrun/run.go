package temporalrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/pipeline"
)

// RunInput is what a run workflow carries: where every driver host finds
// the pipeline and the store, and the run's flags. Never secrets: keys
// and store credentials come from each host's environment.
type RunInput struct {
	Run string `json:"run"`
	// Repository scopes the queues (the store's repository name).
	Repository string `json:"repository"`
	// Config is the pipeline config's path on driver hosts; ConfigHash
	// its hash, which a driver built from another config refuses.
	Config     string `json:"config"`
	ConfigHash string `json:"config_hash"`
	// Overrides are the command line's key.path=value overrides of
	// Config, applied in order on every driver host.
	Overrides []string `json:"overrides,omitempty"`
	// Store is the store URI every host opens (lakefs://REPO).
	Store     string `json:"store"`
	NoCache   bool   `json:"no_cache,omitempty"`
	NoOverlap bool   `json:"no_overlap,omitempty"`
	// AllowConfigChange is driver.Options.AllowConfigChange.
	AllowConfigChange bool `json:"allow_config_change,omitempty"`
	// Heartbeat is the driver's and the workers' heartbeat timeout.
	Heartbeat time.Duration `json:"heartbeat_ns,omitempty"`
}

// Driver runs (or resumes) a run's loop to its end with the Temporal
// executor and returns a JSON summary. It must be safe to call again
// after a crash anywhere: pipeline runs are (they resume from the last
// committed iteration; finished tasks are cache hits or attached
// workflows).
type Driver func(ctx context.Context, in RunInput) (json.RawMessage, error)

// RunID is the workflow id of a run: one workflow per run and repository.
func RunID(repo, run string) string { return "rlpipe/" + repo + "/runs/" + run }

// runWorkflow drives a run by running the drive activity on the driver
// queue until it succeeds: when the driver's host dies its heartbeat
// stops, and Temporal gives the loop to another driver worker, which
// resumes it from the store.
func runWorkflow(ctx workflow.Context, in RunInput) (json.RawMessage, error) {
	hb := in.Heartbeat
	if hb <= 0 {
		hb = DefaultHeartbeat
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           DriverQueue(in.Repository),
		StartToCloseTimeout: 365 * 24 * time.Hour,
		HeartbeatTimeout:    hb,
		WaitForCancellation: true,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
			NonRetryableErrorTypes: []string{errPermanent},
		},
	})
	var out json.RawMessage
	err := workflow.ExecuteActivity(actx, DriveAction, in).Get(ctx, &out)
	cancelled := temporal.IsCanceledError(err)
	// A cancel that comes while an attempt of the loop is failing (a
	// store out of reach) ends that attempt as failed, not cancelled: the
	// server does not retry an activity whose cancel was requested. The
	// run was cancelled all the same.
	if v := workflow.GetVersion(ctx, "cancel-after-failed-drive", workflow.DefaultVersion, 1); v == 1 && err != nil && !cancelled && ctx.Err() != nil {
		cancelled, err = true, ctx.Err()
	}
	if cancelled {
		// A loop that runs when the cancel comes cancels the tasks it
		// waits for. Tasks a detached driver left running have no loop
		// waiting for them (the cancel found the loop between drivers):
		// cancel every open task of the run.
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		cctx := workflow.WithActivityOptions(dctx, workflow.ActivityOptions{
			TaskQueue: DriverQueue(in.Repository), StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3},
		})
		_ = workflow.ExecuteActivity(cctx, CancelTasksAction, in).Get(dctx, nil)
	}
	return out, err
}

// CancelTasks cancels the open task workflows of the run: those of its
// branch and of its iterations' work branches (TaskID).
func (d *drive) CancelTasks(ctx context.Context, in RunInput) (int, error) {
	branch := runs.Branch(in.Run)
	prefix := "rlpipe/" + in.Repository + "/"
	ofRun := func(id string) bool {
		rest, ok := strings.CutPrefix(id, prefix)
		if !ok {
			return false
		}
		if strings.HasPrefix(rest, branch+"/") {
			return true
		}
		num, ok := strings.CutPrefix(rest, pipeline.WorkBranchPrefix+branch+"-")
		return ok && len(num) > 7 && num[6] == '/' && strings.Trim(num[:6], "0123456789") == ""
	}
	query := fmt.Sprintf("(WorkflowType = '%s' OR WorkflowType = '%s') AND ExecutionStatus = 'Running'", TaskWorkflow, TaskFastWorkflow)
	var token []byte
	n := 0
	for {
		resp, err := d.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return n, fmt.Errorf("list the open tasks of run %s: %w", in.Run, err)
		}
		for _, e := range resp.GetExecutions() {
			id := e.GetExecution().GetWorkflowId()
			if !ofRun(id) {
				continue
			}
			if err := d.c.CancelWorkflow(ctx, id, e.GetExecution().GetRunId()); err != nil {
				var nf *serviceerror.NotFound
				if !errors.As(err, &nf) {
					return n, fmt.Errorf("cancel task workflow %s of run %s: %w", id, in.Run, err)
				}
			}
			n++
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return n, nil
		}
	}
}

type drive struct {
	f Driver
	c client.Client
}

// Drive runs the loop, heartbeating. A task that failed for good, or a
// config error, fails the run workflow; anything else (a lost store or
// Temporal connection, the lock of a driver still alive) is retried.
func (d *drive) Drive(ctx context.Context, in RunInput) (json.RawMessage, error) {
	info := activity.GetInfo(ctx)
	every := info.HeartbeatTimeout / 3
	if every <= 0 || every > 10*time.Second {
		every = 10 * time.Second
	}
	// The loop's context: cancelled with ErrDetached when this worker
	// stops (the tasks keep running for the next driver), plainly when
	// the run is cancelled.
	lctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	stopping := activity.GetWorkerStopChannel(ctx)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-stopping:
				cancel(ErrDetached)
				return
			case <-ctx.Done():
				select {
				case <-stopping:
					cancel(ErrDetached)
				default:
					cancel(d.why(info))
				}
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, info.Attempt)
			}
		}
	}()
	out, err := d.f(lctx, in)
	if err == nil {
		return out, nil
	}
	if lctx.Err() != nil {
		// The loop stopped because this drive did (a detach, or the run's
		// cancellation): whatever it reports — a task interrupted midway
		// looks like a failed task — is not the run's failure.
		return nil, fmt.Errorf("driver stopped: %w", context.Cause(lctx))
	}
	var te *pipeline.TaskError
	if errors.As(err, &te) || errors.Is(err, pipeline.ErrConfig) || errors.Is(err, pipeline.ErrPermanent) {
		return nil, temporal.NewApplicationErrorWithOptions(err.Error(), errPermanent, temporal.ApplicationErrorOptions{NonRetryable: true})
	}
	return nil, err
}

// why says why a drive lost its context: the run was cancelled (so are
// its tasks), or anything else — a heartbeat the server no longer
// accepts because another driver took over, a lost connection — which
// must leave the tasks to the driver that has them now.
func (d *drive) why(info activity.Info) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	desc, err := d.c.DescribeWorkflowExecution(ctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID)
	if err != nil {
		return ErrDetached
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED {
		return context.Canceled
	}
	for _, a := range desc.GetPendingActivities() {
		if a.GetActivityId() == info.ActivityID && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED && a.GetAttempt() == info.Attempt {
			return context.Canceled
		}
	}
	return ErrDetached
}

// StartRun starts the run workflow, or attaches to it when it is already
// running (a second `rlpipe run`, or one after the first was killed).
func StartRun(ctx context.Context, c client.Client, in RunInput) (client.WorkflowRun, error) {
	if in.Repository == "" || in.Run == "" {
		return nil, fmt.Errorf("%w: a run on Temporal needs a run name and the store's repository", pipeline.ErrConfig)
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: RunID(in.Repository, in.Run), TaskQueue: DriverQueue(in.Repository),
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, RunWorkflow, in)
	if err != nil {
		return nil, fmt.Errorf("start run %s on Temporal: %w", in.Run, err)
	}
	return run, nil
}

// Holder is the driver worker that runs a run's loop now, as Temporal
// last heard from it.
type Holder struct {
	// Worker is its Temporal identity (host/pid/driver).
	Worker string
	// LastHeartbeat is when it last reported (its start before the first
	// heartbeat).
	LastHeartbeat time.Time
	// Timeout is how long it may go silent before the loop moves to
	// another driver worker.
	Timeout time.Duration
}

// Mine reports whether h is a driver worker of this process.
func (h Holder) Mine() bool { return strings.HasPrefix(h.Worker, workerName()+"/") }

// Lost is how long, from now, until the loop moves on if the holder is
// gone: its heartbeat timeout less the time since it last reported.
func (h Holder) Lost(now time.Time) time.Duration {
	return max(0, h.Timeout-now.Sub(h.LastHeartbeat)).Round(time.Second)
}

// LoopHolder returns the driver worker running the loop of run in
// repository repo; ok is false when no driver runs it now (it waits for
// one, or the run is over).
func LoopHolder(ctx context.Context, c client.Client, repo, run string) (h Holder, ok bool, err error) {
	desc, err := c.DescribeWorkflowExecution(ctx, RunID(repo, run), "")
	if err != nil {
		return Holder{}, false, fmt.Errorf("describe run %s on Temporal: %w", run, err)
	}
	for _, a := range desc.GetPendingActivities() {
		if a.GetActivityType().GetName() != DriveAction || a.GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED {
			continue
		}
		h = Holder{Worker: a.GetLastWorkerIdentity(), LastHeartbeat: a.GetLastStartedTime().AsTime(), Timeout: DefaultHeartbeat}
		if t := a.GetLastHeartbeatTime(); t != nil && t.AsTime().After(h.LastHeartbeat) {
			h.LastHeartbeat = t.AsTime()
		}
		if d := a.GetActivityOptions().GetHeartbeatTimeout(); d != nil {
			h.Timeout = d.AsDuration()
		}
		return h, true, nil
	}
	return Holder{}, false, nil
}
