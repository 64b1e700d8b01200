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
	"go.temporal.io/sdk/client"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/pipeline/temporalrun"
)

// The fast path: once a task's call has been short, the next call's first
// attempt runs inside its workflow task (a local activity). The
// executors of these tests use a 2 s heartbeat, so the workflow task's
// timeout is 2 s, an attempt on the fast path may run 1 s, and a call
// takes the fast path after one that ran under 500 ms.

// twoCalls runs call "first" of task, then call "second", on an
// executor over c, and returns the second call's retried events.
func twoCalls(t *testing.T, c client.Client, st artifacts.Store, task *pipeline.Task, envs map[string]pipeline.Settings) string {
	t.Helper()
	ctx := context.Background()
	var evs syncEvents
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "fast", Envs: envs, Executor: newExecutor(t, c, st, zerolog.Nop()), OnEvent: evs.add, NoCache: true})
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
// path runs past its 1 s bound runs again as a regular attempt, which
// does not count against its retries (it allows one attempt).
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
				case <-time.After(5 * time.Second):
					t.Error("the attempt on the fast path was not stopped at its bound")
				}
			}
			return os.WriteFile(tc.OutputPath("out"), []byte(tc.Task), 0o644)
		}}
	envs := map[string]pipeline.Settings{"x": {Retry: pipeline.Retry{Attempts: 1}}}
	serve(t, c, st, []*pipeline.Task{task}, envs, "x")
	retried := twoCalls(t, c, st, task, envs)
	if !strings.Contains(retried, "attempt 1 ran past 1s, the bound of an attempt run inside its workflow task; it runs again as a regular attempt") {
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
// the fast path runs (the stand-in's generate takes 300 ms, so from the
// second iteration on its first attempt runs inside its workflow task):
// the workflow task times out, and the attempt runs again on a second
// worker, counted as lost, not failed; every artifact equals the local
// executor's.
func TestFastPathKilledWorker(t *testing.T) {
	cfg, setup := standinConfig(t, "300ms")
	want := localSums(t, setup, cfg, "standin")
	c := newCluster(t, setup)
	for _, env := range []string{"sample", "reward", "train", "health"} {
		c.worker(env, cfg, "--env", env)
	}
	genA := c.worker("generate-a", cfg, "--env", "generate")
	driver := c.start("run", c.runArgs(cfg, "-o", "json")...)
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
		if strings.Contains(e, `"kind":"task.retried"`) && strings.Contains(e, "attempt 1 lost: its worker stopped answering for 2s") {
			lost++
		}
	}
	if lost != 1 {
		t.Errorf("%d task.retried events record an attempt lost on the fast path, want 1; events:\n%s", lost, strings.Join(evs, "\n"))
	}
}
