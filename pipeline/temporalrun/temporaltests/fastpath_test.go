package temporaltests_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/pipeline/temporalrun"
)

// The fast path: once a task's call has been short, the next call's first
// attempt runs inside its workflow task (a local activity). These tests
// use a 4 s heartbeat, so the workflow task's timeout is 4 s, an attempt
// on the fast path may run 2 s, and a call takes the fast path after one
// that ran under 1 s.
const fastHeartbeat = 4 * time.Second

// twoCalls runs call "first" of task, then call "second", on an
// executor over c, and returns the second call's retried events.
func twoCalls(t *testing.T, c client.Client, st artifacts.Store, task *pipeline.Task, envs map[string]pipeline.Settings) string {
	t.Helper()
	ctx := context.Background()
	var evs syncEvents
	x, err := temporalrun.NewExecutor(temporalrun.ExecutorOptions{Client: c, Repository: repo, Pipeline: pipe, Store: st, Heartbeat: fastHeartbeat, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "fast", Envs: envs, Executor: x, OnEvent: evs.add, NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	it := r.Iteration(1)
	if err := it.Go(ctx, task, pipeline.Call{Name: "first", Params: 1}).Wait(ctx); err != nil {
		t.Fatalf("first call: %v", err)
	}
	if got := evs.retried(); got != "" {
		t.Fatalf("the first call was retried: %s", got)
	}
	if err := it.Go(ctx, task, pipeline.Call{Name: "second", Params: 2}).Wait(ctx); err != nil {
		t.Fatalf("second call: %v (retried: %s)", err, evs.retried())
	}
	return evs.retried()
}

// TestFastPathAttemptTooLongRunsAgain: a call whose attempt on the fast
// path runs past its 2 s bound is cancelled and runs again as a regular
// attempt, which does not count against its retries (it allows one).
func TestFastPathAttemptTooLongRunsAgain(t *testing.T) {
	_, c := newServer(t)
	st := standintest.NewStore(t, 0)
	var calls atomic.Int32
	task := &pipeline.Task{Name: "quick-then-slow", Env: "x", Outputs: []pipeline.Output{{Name: "out"}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			if calls.Add(1) == 2 { // the second call's first attempt
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(10 * time.Second):
					t.Error("the attempt on the fast path was not stopped at its bound")
				}
			}
			return os.WriteFile(tc.OutputPath("out"), []byte(tc.Task), 0o644)
		}}
	envs := map[string]pipeline.Settings{"x": {Retry: pipeline.Retry{Attempts: 1}}}
	serve(t, c, st, []*pipeline.Task{task}, envs, "x")
	retried := twoCalls(t, c, st, task, envs)
	if !strings.Contains(retried, "attempt 1 ran past 2s, the bound of an attempt run inside its workflow task, and was cancelled; it runs again as a regular attempt") {
		t.Fatalf("retried events %q: want the attempt that ran past the fast path's bound", retried)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("the task body ran %d times, want 3 (first call, and the second call twice)", n)
	}
}

// TestFastPathStoppedWorker stops the only worker while an attempt on the
// fast path runs and starts another: the attempt is lost, not failed,
// and runs again there as a regular attempt.
func TestFastPathStoppedWorker(t *testing.T) {
	_, c := newServer(t)
	st := standintest.NewStore(t, 0)
	var calls atomic.Int32
	started := make(chan struct{}, 1)
	task := &pipeline.Task{Name: "quick-then-stuck", Env: "x", Outputs: []pipeline.Output{{Name: "out"}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			if calls.Add(1) == 2 {
				started <- struct{}{}
				<-ctx.Done() // its worker stops under it
				return ctx.Err()
			}
			return os.WriteFile(tc.OutputPath("out"), []byte(tc.Task), 0o644)
		}}
	envs := map[string]pipeline.Settings{"x": {Retry: pipeline.Retry{Attempts: 1}}}
	stop := startWorkers(t, st, pipeline.WorkerOptions{Tasks: []*pipeline.Task{task}, Envs: envs},
		temporalrun.WorkerOptions{Client: c, Repository: repo, Pipeline: pipe, Envs: []string{"x"}, Name: "first"})
	go func() {
		waitFor(t, started, "the second call's attempt to start")
		stop()
		serve(t, c, st, []*pipeline.Task{task}, envs, "x")
	}()
	retried := twoCalls(t, c, st, task, envs)
	if !strings.Contains(retried, "attempt 1 lost: ") {
		t.Fatalf("retried events %q: want the lost attempt", retried)
	}
}

// TestFastPathKilledWorker SIGKILLs a worker process while an attempt on
// the fast path runs (the stand-in's generate takes 600 ms, so from the
// second iteration on its first attempt runs inside its workflow task):
// the workflow task times out, and the attempt runs again on a second
// worker, counted as lost, not failed; every artifact equals the local
// executor's.
func TestFastPathKilledWorker(t *testing.T) {
	c, cfg, want, genA := standinCluster(t, "600ms")
	driver := c.start("run", c.runArgs(cfg, "-o", "json", "--heartbeat", fastHeartbeat.String())...)
	third := `"iteration":3,"task":"generate","attempt":1`
	genA.waitOutput(t, third)
	genA.kill()
	for _, line := range strings.Split(genA.stderr.String(), "\n") {
		if strings.Contains(line, third) && strings.Contains(line, `"message":"attempt finished"`) {
			t.Fatalf("iteration 3's generate attempt finished before its worker was killed; its log:\n%s", tail(genA.stderr.String(), 20))
		}
	}
	c.worker("generate-b", cfg, "--env", "generate")
	if err := driver.wait(t); err != nil {
		t.Fatalf("run: %v\n%s", err, driver.stderr.String())
	}
	var out runJSON
	if err := json.Unmarshal([]byte(driver.stdout.String()), &out); err != nil || out.Iterations != 6 {
		t.Fatalf("run printed %q (%v): want 6 iterations", driver.stdout.String(), err)
	}
	got, evs := c.storeSums("standin")
	sameSums(t, want, got)
	lost := 0
	for _, e := range evs {
		if strings.Contains(e, `"kind":"task.retried"`) && strings.Contains(e, "attempt 1 lost: its workflow task timed out or failed (a worker died or was cut off for 4s") {
			lost++
		}
	}
	if lost != 1 {
		t.Errorf("%d task.retried events record an attempt lost on the fast path, want 1; events:\n%s", lost, strings.Join(evs, "\n"))
	}
}

// TestFastPathBusyWorkerQueues: when the worker that takes a call's
// workflow task has no room for its attempt (the environment allows one
// attempt at a time, and another call holds it), the attempt is not run
// there and not counted: it goes to the queue as a regular attempt and
// runs when the worker is free.
func TestFastPathBusyWorkerQueues(t *testing.T) {
	_, c := newServer(t)
	st := standintest.NewStore(t, 0)
	holding, release := make(chan struct{}), make(chan struct{})
	task := &pipeline.Task{Name: "one-at-a-time", Env: "x", Outputs: []pipeline.Output{{Name: "out"}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			if tc.Task == "hold" {
				close(holding)
				<-release
			}
			return os.WriteFile(tc.OutputPath("out"), []byte(tc.Task), 0o644)
		}}
	envs := map[string]pipeline.Settings{"x": {Concurrency: 1, Retry: pipeline.Retry{Attempts: 1}}}
	serve(t, c, st, []*pipeline.Task{task}, envs, "x")
	ctx := context.Background()
	var evs syncEvents
	x, err := temporalrun.NewExecutor(temporalrun.ExecutorOptions{Client: c, Repository: repo, Pipeline: pipe, Store: st, Heartbeat: fastHeartbeat, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{Executor: x}
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "busy", Envs: envs, Executor: rec, OnEvent: evs.add, NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	it := r.Iteration(1)
	if err := it.Go(ctx, task, pipeline.Call{Name: "learn"}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	hold := it.Go(ctx, task, pipeline.Call{Name: "hold"})
	waitFor(t, holding, "the first call to hold the environment's one slot")
	queued := it.Go(ctx, task, pipeline.Call{Name: "queued"})
	time.Sleep(300 * time.Millisecond) // the second call finds no room and queues
	close(release)
	for _, n := range []*pipeline.Node{hold, queued} {
		if err := n.Wait(ctx); err != nil {
			t.Fatalf("%v (retried: %s)", err, evs.retried())
		}
	}
	if got := evs.retried(); got != "" {
		t.Fatalf("retried events %q: an attempt with no room on the fast path is not an attempt", got)
	}
	// The second call's workflow tried the fast path (a marker), then
	// scheduled a regular attempt.
	var kinds []string
	for _, id := range rec.ids {
		if !strings.Contains(id, "/queued/") {
			continue
		}
		h := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for h.HasNext() {
			ev, err := h.Next()
			if err != nil {
				t.Fatal(err)
			}
			kinds = append(kinds, ev.GetEventType().String())
		}
	}
	got := strings.Join(kinds, " ")
	if !strings.Contains(got, "MarkerRecorded ActivityTaskScheduled") {
		t.Fatalf("the queued call's history is %s: want a local attempt's marker, then a regular attempt", got)
	}
}
