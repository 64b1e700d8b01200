// Package temporaltests runs rlpipe against a real Temporal server
// started in this process (go.temporal.io/server/temporaltest): the
// executor's semantics next to the local executor's, and whole pipelines
// with workers in separate processes. The server takes minutes to
// compile cold, so these tests live apart from every other package.
package temporaltests_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/server/temporaltest"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/pipeline/temporalrun"
)

// repo and pipe scope the tests' queues.
const repo, pipe = "tt", "p1"

// newServer starts a Temporal server for the test and returns a client.
func newServer(t *testing.T) (*temporaltest.TestServer, client.Client) {
	t.Helper()
	ts := temporaltest.NewServer(devConfig(), temporaltest.WithT(t))
	return ts, ts.GetDefaultClient()
}

// serve runs in-process workers for envs until the test ends.
func serve(t *testing.T, c client.Client, st artifacts.Store, tasks []*pipeline.Task, envs map[string]pipeline.Settings, serveEnvs ...string) {
	t.Helper()
	servePipeline(t, c, pipe, st, tasks, envs, serveEnvs...)
}

// servePipeline runs in-process workers for envs of pipeline p until the
// test ends.
func servePipeline(t *testing.T, c client.Client, p string, st artifacts.Store, tasks []*pipeline.Task, envs map[string]pipeline.Settings, serveEnvs ...string) {
	t.Helper()
	conc := map[string]int{}
	for _, e := range serveEnvs {
		conc[e] = 2
	}
	t.Cleanup(startWorkers(t, st, pipeline.WorkerOptions{Tasks: tasks, Envs: envs},
		temporalrun.WorkerOptions{Client: c, Repository: repo, Pipeline: p, Envs: serveEnvs, Concurrency: conc}))
}

// startWorkers starts the Temporal workers of wo running a worker of po's
// tasks (wo.Worker is set here) and returns what stops them.
func startWorkers(t testing.TB, st artifacts.Store, po pipeline.WorkerOptions, wo temporalrun.WorkerOptions) (stop func()) {
	t.Helper()
	w, err := pipeline.NewWorker(st, po)
	if err != nil {
		t.Fatal(err)
	}
	wo.Worker = w
	ws, err := temporalrun.Workers(wo)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	stop = func() {
		for _, x := range ws[:n] {
			x.Stop()
		}
	}
	for _, x := range ws {
		if err := x.Start(); err != nil {
			stop()
			t.Fatal(err)
		}
		n++
	}
	return stop
}

// recorder is an executor that remembers the workflow id of every job.
type recorder struct {
	*temporalrun.Executor
	mu  sync.Mutex
	ids []string
}

func (r *recorder) Execute(ctx context.Context, t *pipeline.Task, job pipeline.Job, report func(pipeline.Event)) (pipeline.Outcome, error) {
	r.mu.Lock()
	r.ids = append(r.ids, temporalrun.TaskID(repo, job))
	r.mu.Unlock()
	return r.Executor.Execute(ctx, t, job, report)
}

func newExecutor(t *testing.T, c client.Client, st artifacts.Store, log zerolog.Logger) *recorder {
	t.Helper()
	return newPipelineExecutor(t, c, pipe, st, log)
}

// newPipelineExecutor returns an executor whose calls go to the queues
// of pipeline p.
func newPipelineExecutor(t *testing.T, c client.Client, p string, st artifacts.Store, log zerolog.Logger) *recorder {
	t.Helper()
	x, err := temporalrun.NewExecutor(temporalrun.ExecutorOptions{Client: c, Repository: repo, Pipeline: p, Store: st, Heartbeat: 2 * time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return &recorder{Executor: x}
}

func standinEnvs() map[string]pipeline.Settings {
	quick := pipeline.Settings{Retry: pipeline.Retry{Attempts: 3, Backoff: 5 * time.Millisecond}}
	return map[string]pipeline.Settings{"sample": quick, "generate": quick, "reward": quick, "train": quick}
}

func sameSums(t testing.TB, want, got map[string]string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("the reference run has no artifacts")
	}
	for p, s := range want {
		if got[p] != s {
			t.Errorf("%s: checksum %q, want %q (the local executor's)", p, got[p], s)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: only in the Temporal run", p)
		}
	}
}

// TestStandinLoopMatchesLocal runs the stand-in loop (overlap on) once
// with the local executor and once through Temporal, in two stores with
// the same seed: every artifact is byte-identical, and every task ran as
// a completed task workflow.
func TestStandinLoopMatchesLocal(t *testing.T) {
	ctx := context.Background()
	stages := standin.Stages(standin.Options{SamplesPerPrompt: 2})
	cfg := pipeline.LoopConfig{Iterations: 4, BatchSize: 3, MaxStaleness: 1, Dataset: pipeline.StoreArtifact("main", "data/prompts.parquet")}

	ref := standintest.NewStore(t, 10)
	standintest.Loop(t, ref, pipeline.RunOptions{Name: "s", Envs: standinEnvs(), Seed: 5}, cfg, stages)

	_, c := newServer(t)
	st := standintest.NewStore(t, 10)
	serve(t, c, st, stages.Tasks(), standinEnvs(), "sample", "generate", "reward", "train")
	x := newExecutor(t, c, st, zerolog.Nop())
	var finished atomic.Int32
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "s", Envs: standinEnvs(), Seed: 5, Executor: x,
		OnEvent: func(e pipeline.Event) {
			if e.Kind == pipeline.EventFinished {
				finished.Add(1)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	state, err := r.Loop(ctx, cfg, stages)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	if state.Iteration != 4 || state.Cursor != 12 {
		t.Fatalf("state %+v, want iteration 4 and cursor 12", state)
	}
	sameSums(t, standintest.Sums(t, ref, "runs-s"), standintest.Sums(t, st, "runs-s"))
	// 4 iterations × 4 stages, each a completed workflow.
	if len(x.ids) != 16 || finished.Load() != 16 {
		t.Fatalf("%d task workflows and %d finished events, want 16 each", len(x.ids), finished.Load())
	}
	for _, id := range x.ids {
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		if s := d.WorkflowExecutionInfo.GetStatus(); s != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			t.Errorf("workflow %s: %s, want completed", id, s)
		}
	}
}

// TestCancelReachesWorker cancels a run while a task runs on a worker:
// the task's context is cancelled there and its workflow ends cancelled.
func TestCancelReachesWorker(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c, x, node, stopped := runWaitingTask(t, ctx, "c")
	cancel()
	if err := node.Wait(context.Background()); !errors.Is(err, context.Canceled) {
		t.Fatalf("node ended with %v, want context.Canceled", err)
	}
	waitFor(t, stopped, "the worker to cancel the task")
	id := x.ids[0]
	for i := 0; ; i++ {
		d, err := c.DescribeWorkflowExecution(context.Background(), id, "")
		if err != nil {
			t.Fatal(err)
		}
		if d.WorkflowExecutionInfo.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED {
			break
		}
		if i == 600 {
			t.Fatalf("workflow %s is %s, want canceled", id, d.WorkflowExecutionInfo.GetStatus())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCancelledRunStopsTasksNoLoopWaitsFor detaches a driver from a
// running task (its context cancelled with ErrDetached: the task goes on,
// as when the driver's process stops), then cancels the run while its
// loop is between drivers: the drive activity fails at once and waits
// out its retry backoff, so no loop waits for the task to cancel it. The
// run workflow's cancellation still reaches it: the task is cancelled on
// its worker and the run ends cancelled (docs/DEPLOY.md: a cancel stops
// every task in flight). The same holds for a task workflow of the fast
// path (rlpipe.task.fast) whose first attempt ran past its bound and
// whose regular attempt is running, and when the cancel reaches a drive
// attempt that then fails (the server does not retry an activity whose
// cancel was requested, so the drive activity ends failed, not
// cancelled: that race once failed this test).
func TestCancelledRunStopsTasksNoLoopWaitsFor(t *testing.T) {
	for _, fast := range []bool{false, true} {
		t.Run(fmt.Sprintf("fast path %v", fast), func(t *testing.T) { cancelRunBetweenDrivers(t, fast, false) })
	}
	t.Run("cancel during a failing attempt", func(t *testing.T) { cancelRunBetweenDrivers(t, false, true) })
}

// cancelRunBetweenDrivers is TestCancelledRunStopsTasksNoLoopWaitsFor;
// with during, each drive attempt fails half a second after it starts,
// once the test has requested the cancel.
func cancelRunBetweenDrivers(t *testing.T, fast, during bool) {
	ctx, detach := context.WithCancelCause(context.Background())
	c, _, node, stopped := runWaitingTaskOn(t, ctx, "d", fast)
	detach(temporalrun.ErrDetached)
	_ = node.Wait(context.Background())

	// A driver whose loop fails at once, as with a store out of reach.
	tried := make(chan struct{}, 1)
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- temporalrun.Serve(sctx, temporalrun.WorkerOptions{Client: c, Repository: repo,
			Drive: func(context.Context, temporalrun.RunInput) (json.RawMessage, error) {
				select {
				case tried <- struct{}{}:
				default:
				}
				if during {
					// Fail after the cancel is requested, before a
					// heartbeat can tell the attempt of it.
					time.Sleep(500 * time.Millisecond)
				}
				return nil, errors.New("store out of reach")
			}})
	}()
	t.Cleanup(func() { stop(); <-served })
	wr, err := temporalrun.StartRun(context.Background(), c, temporalrun.RunInput{Run: "d", Repository: repo, Heartbeat: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, tried, "the driver to try the loop")
	if err := c.CancelWorkflow(context.Background(), wr.GetID(), ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, stopped, "the cancelled run to cancel the task the detached driver left running")
	if err := wr.Get(context.Background(), nil); !temporal.IsCanceledError(err) {
		t.Fatalf("the run workflow ended with %v, want cancelled", err)
	}
}

// runWaitingTask starts a Temporal server, a worker of env x and run
// NAME on ctx, whose first iteration runs a task that runs until it is
// cancelled; it returns once the task started on the worker. stopped
// closes when the task's context ends there.
func runWaitingTask(t *testing.T, ctx context.Context, name string) (c client.Client, x *recorder, node *pipeline.Node, stopped <-chan struct{}) {
	return runWaitingTaskOn(t, ctx, name, false)
}

// runWaitingTaskOn is runWaitingTask; with fast, a short call of the task
// runs first, so that the waiting call takes the fast path: its first
// attempt runs past its bound (1 s) and is cancelled, and the call
// returns once its second, regular attempt started.
func runWaitingTaskOn(t *testing.T, ctx context.Context, name string, fast bool) (c client.Client, x *recorder, node *pipeline.Node, stopped <-chan struct{}) {
	t.Helper()
	_, c = newServer(t)
	st := standintest.NewStore(t, 0)
	started, done := make(chan struct{}), make(chan struct{})
	task := &pipeline.Task{Name: "wait", Env: "x", Outputs: []pipeline.Output{{Name: "out"}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			if tc.Task == "learn" {
				return os.WriteFile(tc.OutputPath("out"), nil, 0o644)
			}
			if fast && tc.Attempt == 1 {
				<-ctx.Done() // the fast path's bound
				return ctx.Err()
			}
			close(started)
			<-ctx.Done()
			close(done)
			return ctx.Err()
		}}
	envs := map[string]pipeline.Settings{"x": {}}
	serve(t, c, st, []*pipeline.Task{task}, envs, "x")
	x = newExecutor(t, c, st, zerolog.Nop())
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: name, Envs: envs, Executor: x})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	it := r.Iteration(1)
	if fast {
		if err := it.Go(ctx, task, pipeline.Call{Name: "learn"}).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	node = it.Go(ctx, task, pipeline.Call{})
	waitFor(t, started, "the task to start on the worker")
	return c, x, node, done
}

// waitFor waits for ch; the bound only stops a hung test.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(2 * time.Minute):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestQueueWithoutWorkerWaits dispatches a task whose environment no
// worker serves: the driver warns, naming the command that serves it,
// and the task runs as soon as a worker starts.
func TestQueueWithoutWorkerWaits(t *testing.T) {
	_, c := newServer(t)
	st := standintest.NewStore(t, 0)
	task := &pipeline.Task{Name: "lonely", Env: "gpu", Outputs: []pipeline.Output{{Name: "out"}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			return os.WriteFile(tc.OutputPath("out"), []byte("done"), 0o644)
		}}
	envs := map[string]pipeline.Settings{"gpu": {}}
	var logs standintest.LogBuffer
	x := newExecutor(t, c, st, zerolog.Nop())
	ctx := context.Background()
	waiting := make(chan pipeline.Event, 1)
	onEvent := func(e pipeline.Event) {
		if e.Kind == pipeline.EventWaiting {
			waiting <- e
		}
	}
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "q", Envs: envs, Executor: x, Logger: zerolog.New(&logs), OnEvent: onEvent})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	node := r.Iteration(1).Go(ctx, task, pipeline.Call{})
	// The warning is a task.waiting event, which the run logs as a
	// warning and the live display keeps on screen.
	var e pipeline.Event
	select {
	case e = <-waiting:
	case <-time.After(time.Minute):
		t.Fatalf("no task.waiting event for the unserved queue; logs:\n%s", logs.String())
	}
	queue := temporalrun.Queue(repo, pipe, "gpu")
	wantMsg := "no worker serves environment gpu of this pipeline yet: its tasks wait on queue " + queue + " until one does (start `rlpipe worker --env gpu` with the same pipeline config and store)"
	if e.Env != "gpu" || e.Task != "lonely" || e.Error != wantMsg {
		t.Fatalf("task.waiting event %+v, want env gpu, task lonely and error %q", e, wantMsg)
	}
	if !strings.Contains(logs.String(), `"level":"warn","event":"task.waiting"`) {
		t.Errorf("the run did not log the waiting task as a warning:\n%s", logs.String())
	}
	select {
	case <-doneCh(node):
		t.Fatal("the task finished with no worker serving its queue")
	default:
	}
	serve(t, c, st, []*pipeline.Task{task}, envs, "gpu")
	if err := node.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	a, _ := node.Result("out")
	if got := standintest.Read(t, st, a.Ref, a.Path); string(got) != "done" {
		t.Fatalf("output %q", got)
	}
}

func doneCh(n *pipeline.Node) <-chan struct{} {
	ch := make(chan struct{})
	go func() { _ = n.Wait(context.Background()); close(ch) }()
	return ch
}

// TestWorkerRefusesAnotherPipeline sends jobs a worker cannot honour: a
// task it does not have, and a job planned from another config. Both
// fail at once with an error that says what to do. Once the right worker
// serves the queue, running the same calls again runs them: a failed
// task workflow is not replayed to the next run.
func TestWorkerRefusesAnotherPipeline(t *testing.T) {
	_, c := newServer(t)
	st := standintest.NewStore(t, 0)
	mk := func(name string) *pipeline.Task {
		return &pipeline.Task{Name: name, Env: "x", Outputs: []pipeline.Output{{Name: "out"}},
			Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
				return os.WriteFile(tc.OutputPath("out"), []byte(name), 0o644)
			}}
	}
	envs := map[string]pipeline.Settings{"x": {Retry: pipeline.Retry{Attempts: 3}}}
	stop := startWorkers(t, st, pipeline.WorkerOptions{Tasks: []*pipeline.Task{mk("known")}, Envs: envs, ConfigHashes: []string{"aaaaaaaaaaaaaaaa"}},
		temporalrun.WorkerOptions{Client: c, Repository: repo, Pipeline: pipe, Envs: []string{"x"}})
	ctx := context.Background()
	for _, tc := range []struct {
		task, hash, want string
	}{
		{"unknown", "aaaaaaaaaaaaaaaa", `this worker has no task "unknown" (it has known); start it from the driver's pipeline config`},
		{"known", "bbbbbbbbbbbbbbbb", "this worker was started from config aaaaaaaaaaaa but the driver runs config bbbbbbbbbbbb; restart the worker with the driver's pipeline config"},
	} {
		r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "w" + tc.task, Envs: envs, ConfigHash: tc.hash, Executor: newExecutor(t, c, st, zerolog.Nop())})
		if err != nil {
			t.Fatal(err)
		}
		err = r.Iteration(1).Go(ctx, mk(tc.task), pipeline.Call{}).Wait(ctx)
		r.Close()
		var te *pipeline.TaskError
		if !errors.As(err, &te) || te.Attempts != 1 || !errors.Is(err, pipeline.ErrPermanent) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("task %s with config %s: %v; want one permanent attempt saying %q", tc.task, tc.hash, err, tc.want)
		}
	}
	stop()
	serve(t, c, st, []*pipeline.Task{mk("known"), mk("unknown")}, envs, "x")
	for _, tc := range []struct{ task, hash string }{{"unknown", "aaaaaaaaaaaaaaaa"}, {"known", "bbbbbbbbbbbbbbbb"}} {
		r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "w" + tc.task, Envs: envs, ConfigHash: tc.hash, Executor: newExecutor(t, c, st, zerolog.Nop())})
		if err != nil {
			t.Fatal(err)
		}
		n := r.Iteration(1).Go(ctx, mk(tc.task), pipeline.Call{})
		err = n.Wait(ctx)
		r.Close()
		if err != nil {
			t.Fatalf("task %s run again with the right worker: %v", tc.task, err)
		}
		a, _ := n.Result("out")
		if got := standintest.Read(t, st, a.Ref, a.Path); string(got) != tc.task {
			t.Fatalf("task %s wrote %q", tc.task, got)
		}
	}
}

// TestStoppedWorkerHandsItsAttemptOver stops the only worker while its
// attempt runs (a deploy, Ctrl-C) and starts another: the attempt runs
// again there and the task succeeds although it allows one attempt —
// a stopped worker is not a failed task.
func TestStoppedWorkerHandsItsAttemptOver(t *testing.T) {
	_, c := newServer(t)
	st := standintest.NewStore(t, 0)
	var runs atomic.Int32
	started := make(chan struct{}, 2)
	task := &pipeline.Task{Name: "long", Env: "x", Outputs: []pipeline.Output{{Name: "out"}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			started <- struct{}{}
			if runs.Add(1) == 1 {
				<-ctx.Done() // the first worker stops under it
				return ctx.Err()
			}
			return os.WriteFile(tc.OutputPath("out"), []byte("second"), 0o644)
		}}
	envs := map[string]pipeline.Settings{"x": {Retry: pipeline.Retry{Attempts: 1}}}
	stop := startWorkers(t, st, pipeline.WorkerOptions{Tasks: []*pipeline.Task{task}, Envs: envs},
		temporalrun.WorkerOptions{Client: c, Repository: repo, Pipeline: pipe, Envs: []string{"x"}, Name: "first"})
	ctx := context.Background()
	var evs syncEvents
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "stop", Envs: envs, Executor: newExecutor(t, c, st, zerolog.Nop()), OnEvent: evs.add})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := r.Iteration(1).Go(ctx, task, pipeline.Call{})
	waitFor(t, started, "the attempt to start on the first worker")
	stop()
	serve(t, c, st, []*pipeline.Task{task}, envs, "x")
	if err := n.Wait(ctx); err != nil {
		t.Fatalf("the task failed after its worker stopped: %v", err)
	}
	if !strings.Contains(evs.retried(), "attempt 1 lost: worker first stopped during the attempt") {
		t.Fatalf("retried events %q: want the lost attempt named", evs.retried())
	}
}

// syncEvents collects retried events' errors.
type syncEvents struct {
	mu   sync.Mutex
	errs []string
}

func (s *syncEvents) add(e pipeline.Event) {
	if e.Kind == pipeline.EventRetried {
		s.mu.Lock()
		s.errs = append(s.errs, e.Error)
		s.mu.Unlock()
	}
}

func (s *syncEvents) retried() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.errs, "\n")
}

// TestPipelinesShareARepository serves two pipelines of one repository
// whose tasks have the same names: each run's calls go only to the
// workers of its own pipeline.
func TestPipelinesShareARepository(t *testing.T) {
	_, c := newServer(t)
	st := standintest.NewStore(t, 0)
	mk := func(body string) *pipeline.Task {
		return &pipeline.Task{Name: "gen", Env: "x", Outputs: []pipeline.Output{{Name: "out"}},
			Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
				return os.WriteFile(tc.OutputPath("out"), []byte(body), 0o644)
			}}
	}
	envs := map[string]pipeline.Settings{"x": {}}
	ctx := context.Background()
	for _, p := range []string{"pa", "pb"} {
		t.Cleanup(startWorkers(t, st, pipeline.WorkerOptions{Tasks: []*pipeline.Task{mk("from " + p)}, Envs: envs},
			temporalrun.WorkerOptions{Client: c, Repository: repo, Pipeline: p, Envs: []string{"x"}}))
	}
	for _, p := range []string{"pa", "pb", "pa", "pb"} {
		x, err := temporalrun.NewExecutor(temporalrun.ExecutorOptions{Client: c, Repository: repo, Pipeline: p, Store: st})
		if err != nil {
			t.Fatal(err)
		}
		r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "run-" + p, Envs: envs, Executor: x, NoCache: true})
		if err != nil {
			t.Fatal(err)
		}
		n := r.Iteration(1).Go(ctx, mk("driver's copy"), pipeline.Call{})
		err = n.Wait(ctx)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		a, _ := n.Result("out")
		if got := standintest.Read(t, st, a.Ref, a.Path); string(got) != "from "+p {
			t.Fatalf("pipeline %s's call ran as %q", p, got)
		}
	}
}
