package executortest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/pipeline"
)

// Bounds that only stop a scenario that hangs or give an attempt room to
// start; none decides a pass.
const (
	// waitLimit bounds a call and any wait for a task body.
	waitLimit = 2 * time.Minute
	// deadline is the deadline over all attempts of the deadline
	// scenarios: ample time for a first attempt to fail and a second to
	// start, on Temporal too.
	deadline = 5 * time.Second
	// attemptTimeout is the per-attempt timeout of a body that never
	// returns on its own.
	attemptTimeout = 300 * time.Millisecond
	// backoff is the pause before a retry.
	backoff = 10 * time.Millisecond
)

// env is the one environment of every scenario.
const env = "x"

// fixture is one scenario's store and run, and the events of its calls.
// Its helpers fail the test at once, naming what went wrong.
type fixture struct {
	t   *testing.T
	ctx context.Context
	st  artifacts.Store
	run *pipeline.Run

	mu     sync.Mutex
	events map[string][]pipeline.Event // by call name
}

// open creates the scenario's store, asks the executor under test for an
// executor that runs tasks, and opens a run with it. Every call runs
// (NoCache), so a scenario sees its attempts, not a cache hit.
func open(sub subject, name string, tasks ...*pipeline.Task) *fixture {
	t := sub.t
	t.Helper()
	ctx := t.Context()
	st, err := local.Create(ctx, filepath.Join(t.TempDir(), "store"), "main", nil)
	if err != nil {
		t.Fatalf("create store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	envs := map[string]pipeline.Settings{env: {}}
	x := sub.newExecutor(t, Setup{Name: name, Store: st, Tasks: tasks, Envs: envs})
	f := &fixture{t: t, ctx: ctx, st: st, events: map[string][]pipeline.Event{}}
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: name, Envs: envs, Executor: x, NoCache: true, OnEvent: f.record})
	if err != nil {
		t.Fatalf("open run %s: %v", name, err)
	}
	t.Cleanup(func() { r.Close() })
	f.run = r
	return f
}

func (f *fixture) record(e pipeline.Event) {
	if e.Task == "" {
		return
	}
	f.mu.Lock()
	f.events[e.Task] = append(f.events[e.Task], e)
	f.mu.Unlock()
}

// callEvents returns the events of call name so far.
func (f *fixture) callEvents(name string) []pipeline.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events[name])
}

// outTask is a task of the suite's environment with one output, out,
// whose attempts run body.
func outTask(name string, settings pipeline.Settings, body pipeline.Func) *pipeline.Task {
	return &pipeline.Task{Name: name, Env: env, Outputs: []pipeline.Output{{Name: "out"}}, Settings: settings, Run: body}
}

// callAlone opens the run named run for task alone and calls task once,
// as call does.
func callAlone(sub subject, run string, task *pipeline.Task) (*fixture, *pipeline.Node, error) {
	sub.t.Helper()
	f := open(sub, run, task)
	n, err := f.call(f.ctx, task, pipeline.Call{})
	return f, n, err
}

// call runs task once in iteration 1 under ctx and waits for it.
func (f *fixture) call(ctx context.Context, task *pipeline.Task, c pipeline.Call) (*pipeline.Node, error) {
	f.t.Helper()
	n := f.run.Iteration(1).Go(ctx, task, c)
	wctx, cancel := context.WithTimeout(f.ctx, waitLimit)
	defer cancel()
	err := n.Wait(wctx)
	if wctx.Err() != nil {
		f.t.Fatalf("call %s did not end within %s", task.Name, waitLimit)
	}
	return n, err
}

// ended describes how a call's events must read: a started event of
// attempt 1 first; then, in attempt order, a retried event for each
// failed attempt that was retried, its error containing retried[i]; and
// last the one terminal event end (none for a cancelled call) of attempt
// attempts. A remote executor may report a started event per attempt or
// only the first, so started events are not counted.
type ended struct {
	retried  []string
	end      pipeline.EventKind
	attempts int
}

// check returns what in evs, the events of node n, breaks want.
func (want ended) check(n *pipeline.Node, task string, evs []pipeline.Event) error {
	if len(evs) == 0 || evs[0].Kind != pipeline.EventStarted || evs[0].Attempt != 1 {
		return fmt.Errorf("events %s: want a started event of attempt 1 first", kinds(evs))
	}
	key := n.Key()
	var retried []pipeline.Event
	for i, e := range evs {
		if e.Key != key || e.Iteration != 1 || e.Stage != task || e.Group != "iteration 000001" {
			return fmt.Errorf("event %d (%s): key %q, iteration %d, stage %q, group %q; want the call's key %q, iteration 1, stage %q, group %q",
				i, e.Kind, e.Key, e.Iteration, e.Stage, e.Group, key, task, "iteration 000001")
		}
		switch e.Kind {
		case pipeline.EventRetried:
			retried = append(retried, e)
		case pipeline.EventFinished, pipeline.EventFailed:
			if i != len(evs)-1 {
				return fmt.Errorf("events %s: the %s event is not the last", kinds(evs), e.Kind)
			}
		}
	}
	if len(retried) != len(want.retried) {
		return fmt.Errorf("events %s: %d retried events, want %d", kinds(evs), len(retried), len(want.retried))
	}
	for i, e := range retried {
		if e.Attempt != i+1 || !strings.Contains(e.Error, want.retried[i]) {
			return fmt.Errorf("retried event %d: attempt %d, error %q; want attempt %d and an error containing %q", i+1, e.Attempt, e.Error, i+1, want.retried[i])
		}
	}
	last := evs[len(evs)-1]
	switch {
	case want.end == "" && (last.Kind == pipeline.EventFinished || last.Kind == pipeline.EventFailed):
		return fmt.Errorf("events %s: want no finished or failed event", kinds(evs))
	case want.end == "":
		return nil
	case last.Kind != want.end:
		return fmt.Errorf("events %s: want a %s event last", kinds(evs), want.end)
	case last.Attempt != want.attempts:
		return fmt.Errorf("%s event: attempt %d, want %d", last.Kind, last.Attempt, want.attempts)
	case want.end == pipeline.EventFailed && last.Error == "":
		return fmt.Errorf("failed event: no error")
	}
	return nil
}

func kinds(evs []pipeline.Event) string {
	ks := make([]string, len(evs))
	for i, e := range evs {
		ks[i] = fmt.Sprintf("%s(%d)", e.Kind, e.Attempt)
	}
	return "[" + strings.Join(ks, " ") + "]"
}

// wantEvents checks node n's events (n runs task) against want.
func (f *fixture) wantEvents(n *pipeline.Node, task string, want ended) {
	f.t.Helper()
	if err := want.check(n, task, f.callEvents(task)); err != nil {
		f.t.Fatalf("call %s: %v", task, err)
	}
}

// failure is how a call must fail: after attempts attempts (as its
// *pipeline.TaskError says), matching every error of is with errors.Is,
// Permanent or not, with a message that contains msg.
type failure struct {
	attempts  int
	is        []error
	permanent bool
	msg       string
}

// wantFailure checks err, the error of a call of task, against want.
func wantFailure(t *testing.T, task string, err error, want failure) {
	t.Helper()
	var te *pipeline.TaskError
	if !errors.As(err, &te) {
		t.Fatalf("call %s: error %v (%T), want a *pipeline.TaskError", task, err, err)
	}
	if te.Task != task || te.Attempts != want.attempts {
		t.Fatalf("call %s: task error of task %q after %d attempt(s), want %q after %d: %v", task, te.Task, te.Attempts, task, want.attempts, err)
	}
	for _, target := range want.is {
		if !errors.Is(err, target) {
			t.Fatalf("call %s: error %v does not match %q", task, err, target)
		}
	}
	if got := errors.Is(err, pipeline.ErrPermanent); got != want.permanent {
		t.Fatalf("call %s: permanent %v, want %v: %v", task, got, want.permanent, err)
	}
	if !strings.Contains(err.Error(), want.msg) {
		t.Fatalf("call %s: error %q does not contain %q", task, err, want.msg)
	}
}

// seen records what a task's bodies saw, in the order they ran: the
// bodies run wherever the executor runs them, but in this process.
type seen struct {
	mu       sync.Mutex
	attempts []int
}

// add records an attempt and returns how many bodies ran, this one
// included.
func (s *seen) add(tc *pipeline.TaskContext) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts = append(s.attempts, tc.Attempt)
	return len(s.attempts)
}

// want checks the attempt numbers the bodies saw.
func (s *seen) want(t *testing.T, task string, attempts ...int) {
	t.Helper()
	s.mu.Lock()
	got := slices.Clone(s.attempts)
	s.mu.Unlock()
	if !slices.Equal(got, attempts) {
		t.Fatalf("call %s: its bodies saw attempts %v, want %v", task, got, attempts)
	}
}

// write writes content to a task's output name.
func write(tc *pipeline.TaskContext, name, content string) error {
	return os.WriteFile(tc.OutputPath(name), []byte(content), 0o644)
}

// retrying returns settings that allow attempts attempts, a short pause
// between them.
func retrying(attempts int) pipeline.Settings {
	return pipeline.Settings{Retry: pipeline.Retry{Attempts: attempts, Backoff: backoff, Factor: 1}}
}

// readObject returns the bytes and checksum of ref:path.
func (f *fixture) readObject(ref, path string) (string, string) {
	f.t.Helper()
	rc, info, err := f.st.GetObject(f.ctx, ref, path)
	if err != nil {
		f.t.Fatalf("read %s:%s: %v", ref, path, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		f.t.Fatalf("read %s:%s: %v", ref, path, err)
	}
	return string(b), info.Checksum
}

// waitFor waits for ch; the bound only stops a scenario that hangs.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("waited %s for %s", waitLimit, what)
	}
}
