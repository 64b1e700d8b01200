package standin_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

// running lists the calls whose last event is not one that ends a call:
// what was still running when the loop returned.
func running(evs []pipeline.Event) []string {
	last := map[string]pipeline.EventKind{}
	for _, e := range evs {
		if e.Task != "" {
			last[fmt.Sprintf("%s (iteration %d)", e.Task, e.Iteration)] = e.Kind
		}
	}
	var out []string
	for call, k := range last {
		switch k {
		case pipeline.EventFinished, pipeline.EventFailed, pipeline.EventCancelled, pipeline.EventCached:
		default:
			out = append(out, call+": "+string(k))
		}
	}
	return out
}

// find returns the events of one kind of a call.
func find(evs []pipeline.Event, kind pipeline.EventKind, task string, iteration int) []pipeline.Event {
	var out []pipeline.Event
	for _, e := range evs {
		if e.Kind == kind && e.Task == task && e.Iteration == iteration {
			out = append(out, e)
		}
	}
	return out
}

// blockingEval is an eval-generate stage that holds until its context
// ends, sending the context's cause, and an eval stage that never runs.
func blockingEval(started chan<- struct{}, cause chan<- error) (gen, score *pipeline.Task) {
	gen = &pipeline.Task{Name: "eval-generate", Version: "test", Env: "eval",
		Outputs: []pipeline.Output{{Name: pipeline.OutTrajectories, File: "trajectories.parquet"}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			close(started)
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return ctx.Err()
		}}
	score = &pipeline.Task{Name: "eval", Version: "test", Env: "eval",
		Outputs: []pipeline.Output{{Name: "summary", File: "summary.json"}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			return errors.New("the eval stage ran after its generation was cancelled")
		}}
	return gen, score
}

// A task that fails for good (its retries spent) stops the loop at once:
// the tasks in flight in its iteration (the evaluation of the base
// policy) and in later ones (the next generation, overlapped) are
// cancelled, with the failure as their context's cause, instead of being
// waited for; and the loop returns the failure alone, with nothing left
// running.
func TestLoopStopsAtFirstFailure(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 10)
	stages := standin.Stages(standin.Options{FailTimes: map[string]int{pipeline.SlotGenerate: 99}})
	evalStarted, evalCause := make(chan struct{}), make(chan error, 1)
	evalGen, evalScore := blockingEval(evalStarted, evalCause)
	gen2Started, gen2Cause := make(chan struct{}), make(chan error, 1)
	var mu sync.Mutex
	generations := map[int]int{} // attempts of generate by iteration
	inner := *stages.Generate
	gen := inner
	gen.Run = func(ctx context.Context, tc *pipeline.TaskContext) error {
		mu.Lock()
		generations[tc.Iteration]++
		mu.Unlock()
		if tc.Iteration == 2 { // a long generation, overlapped
			close(gen2Started)
			<-ctx.Done()
			gen2Cause <- context.Cause(ctx)
			return ctx.Err()
		}
		// Both are in flight when iteration 1's generate fails.
		<-evalStarted
		<-gen2Started
		return inner.Run(ctx, tc)
	}
	stages.Generate = &gen
	e := envs()
	e["eval"] = e["generate"]
	var rec standin.Events
	// Room for every task at once: the admission order must not matter.
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "stop", Envs: e, Seed: 1, OnEvent: rec.Add,
		Machine: &pipeline.Machine{CPU: 16, MemoryMB: 16384}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cfg := loopConfig(3, 1)
	stages.Steps = pipeline.EvalSteps(pipeline.EvalConfig{Every: 10, Set: cfg.Dataset}, evalGen, evalScore)
	state, err := r.Loop(ctx, cfg, stages)

	const want = "task generate (iteration 000001) failed after 3 attempt(s): stand-in generate: planned failure of attempt 3 of 99"
	if err == nil || err.Error() != want {
		t.Fatalf("loop: %v\nwant only: %s", err, want)
	}
	var te *pipeline.TaskError
	if !errors.As(err, &te) || te.Task != "generate" || te.Attempts != 3 {
		t.Errorf("loop error %#v: want the *TaskError of generate after 3 attempts", te)
	}
	if state.Iteration != 0 {
		t.Errorf("state %+v: want nothing committed", state)
	}
	mu.Lock()
	if generations[1] != 3 || generations[2] != 1 {
		t.Errorf("generate attempts by iteration %v: want 3 (the retry policy) in iteration 1, the one cancelled in iteration 2", generations)
	}
	mu.Unlock()
	const stopped = "stopped: task generate (iteration 000001) failed"
	for name, ch := range map[string]chan error{"eval-generate-start (iteration 1)": evalCause, "generate (iteration 2)": gen2Cause} {
		if c := <-ch; c == nil || c.Error() != stopped {
			t.Errorf("the context of %s ended with cause %v: want %q", name, c, stopped)
		}
	}
	evs := rec.All()
	if left := running(evs); len(left) > 0 {
		t.Errorf("still running after the loop returned: %v", left)
	}
	for _, c := range []struct {
		task      string
		iteration int
	}{{"eval-generate-start", 1}, {"generate", 2}} {
		if got := find(evs, pipeline.EventCancelled, c.task, c.iteration); len(got) != 1 || got[0].Error != stopped {
			t.Errorf("cancelled events of %s (iteration %d): %+v, want one naming the failed generate", c.task, c.iteration, got)
		}
		if got := find(evs, pipeline.EventFailed, c.task, c.iteration); len(got) != 0 {
			t.Errorf("the cancelled %s (iteration %d) is reported failed: %+v", c.task, c.iteration, got)
		}
	}
	for _, e := range evs {
		if e.Iteration == 3 {
			t.Errorf("event %s of %s in iteration 3: no iteration starts after one failed", e.Kind, e.Task)
		}
	}
}

// A failure in a later iteration leaves the earlier ones alone: with
// overlap, iteration 2's generate fails while iteration 1 trains, and
// iteration 1 still commits. Run again, the loop resumes at iteration 2
// and reuses what iteration 2 had finished.
func TestLaterFailureKeepsEarlierIterations(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 10)
	stages := standin.Stages(standin.Options{})
	var down atomic.Bool
	down.Store(true)
	gen2Failed := make(chan struct{})
	innerGen, innerTrain := *stages.Generate, *stages.Train
	gen, train := innerGen, innerTrain
	gen.Run = func(ctx context.Context, tc *pipeline.TaskContext) error {
		if tc.Iteration == 2 && down.Load() {
			return errors.New("policy server down")
		}
		return innerGen.Run(ctx, tc)
	}
	train.Run = func(ctx context.Context, tc *pipeline.TaskContext) error {
		if tc.Iteration == 1 && down.Load() {
			select { // iteration 1 trains until iteration 2 has failed
			case <-gen2Failed:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return innerTrain.Run(ctx, tc)
	}
	stages.Generate, stages.Train = &gen, &train
	var rec standin.Events
	onEvent := func(e pipeline.Event) {
		rec.Add(e)
		if e.Kind == pipeline.EventFailed && e.Task == "generate" && e.Iteration == 2 {
			close(gen2Failed)
		}
	}
	machine := &pipeline.Machine{CPU: 16, MemoryMB: 16384}
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "later", Envs: envs(), Seed: 1, OnEvent: onEvent, Machine: machine})
	if err != nil {
		t.Fatal(err)
	}
	state, err := r.Loop(ctx, loopConfig(3, 1), stages)
	r.Close()
	const want = "task generate (iteration 000002) failed after 3 attempt(s): policy server down"
	if err == nil || err.Error() != want {
		t.Fatalf("loop: %v\nwant only: %s", err, want)
	}
	if state.Iteration != 1 {
		t.Errorf("state %+v: want iteration 1 committed", state)
	}
	evs := rec.All()
	if left := running(evs); len(left) > 0 {
		t.Errorf("still running after the loop returned: %v", left)
	}
	for _, e := range evs {
		if (e.Iteration == 1 && e.Kind == pipeline.EventCancelled) || e.Iteration == 3 {
			t.Errorf("event %s of %s (iteration %d): iteration 1 must run to its commit, iteration 3 never start", e.Kind, e.Task, e.Iteration)
		}
	}
	if c := find(evs, pipeline.EventCommitted, "", 1); len(c) != 1 {
		t.Errorf("iteration 1 committed %d times, want once", len(c))
	}

	down.Store(false)
	rec = standin.Events{}
	r, err = pipeline.Open(ctx, st, pipeline.RunOptions{Name: "later", Envs: envs(), Seed: 1, OnEvent: rec.Add, Machine: machine})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	state, err = r.Loop(ctx, loopConfig(3, 1), stages)
	if err != nil || state.Iteration != 3 {
		t.Fatalf("resumed: %+v, %v", state, err)
	}
	evs = rec.All()
	if len(evs) == 0 || evs[0].Kind != pipeline.EventResumed || evs[0].Iteration != 2 {
		t.Errorf("first event %+v: want run.resumed at iteration 2", evs[0])
	}
	if c := find(evs, pipeline.EventCached, "sample", 2); len(c) != 1 {
		t.Errorf("the sample of iteration 2 finished before the failure: want it cached, got %+v", c)
	}
	for _, e := range evs {
		if e.Iteration == 1 {
			t.Errorf("resumed run: event %s of %s in committed iteration 1", e.Kind, e.Task)
		}
	}
}
