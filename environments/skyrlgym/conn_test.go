package skyrlgym

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
)

// faultyConn starts a worker of its own for testdata/faulty.py (mark
// sets its setup apart from the other tests'), run directly, with n envs
// made and initialised; it returns the process and the envs' handles.
func faultyConn(t *testing.T, mark int, wall time.Duration, n int) (*pipeConn, []string) {
	t.Helper()
	c, handles := faultyWorker(t, false, mark, wall, n)
	return c.(*pipeConn), handles
}

// faultyWorker is faultyConn, sandboxed or not.
func faultyWorker(t *testing.T, sandboxed bool, mark int, wall time.Duration, n int) (conn, []string) {
	t.Helper()
	o := &Options{EnvClass: "faulty.py:Faulty", Python: pyvenv.Py.Python(t, "run skyrl-gym's environments"),
		Sandbox: &sandboxed, MemoryMB: mark, RequestTimeoutS: wall.Seconds()}
	r, err := resolve(o, "testdata")
	if err != nil {
		t.Fatal(err)
	}
	m := &maker{w: workerFor(r.setup), class: r.class, config: r.config}
	var handles []string
	for i := range n {
		e, err := m.make(tables.Prompt{PromptID: fmt.Sprint(i), Prompt: "go"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Reset(context.Background(), "0"); err != nil {
			t.Fatal(err)
		}
		handles = append(handles, e.(*env).handle)
	}
	c, _, err := m.w.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.kill)
	return c, handles
}

// result is what a call gave.
type result struct {
	line []byte
	err  error
}

// callAsync sends a raw request with id and returns where its result
// arrives.
func callAsync(ctx context.Context, c *pipeConn, id int64, req string, wall time.Duration) chan result {
	out := make(chan result, 1)
	go func() {
		line, err := c.call(ctx, id, []byte(req), wall)
		out <- result{line, err}
	}()
	return out
}

func step(id int64, handle, action string) string {
	return fmt.Sprintf(`{"id": %d, "op": "step", "env": %q, "action": %q}`, id, handle, action)
}

// waitFor polls until cond holds; the test's own deadline bounds it.
func waitFor(cond func() bool) {
	for !cond() {
		time.Sleep(5 * time.Millisecond)
	}
}

func (c *pipeConn) queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

func exists(path string) func() bool {
	return func() bool { _, err := os.Stat(path); return err == nil }
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// lostOf is err as a *lostError, or fails the test.
func lostOf(t *testing.T, what string, err error) *lostError {
	t.Helper()
	var lost *lostError
	if !errors.As(err, &lost) {
		t.Fatalf("%s: %v, want a lost request", what, err)
	}
	return lost
}

// The request being served when the process crashes is the culprit, a
// request written after it is not — even with a smaller id (ids are
// taken before the write; the worker serves in write order).
func TestCulpritIsTheRequestServed(t *testing.T) {
	t.Parallel()
	const wall = time.Minute
	c, h := faultyConn(t, 101, wall, 1)
	f := filepath.Join(t.TempDir(), "crash")
	ctx := context.Background()
	served := callAsync(ctx, c, 1000, step(1000, h[0], "crashon:"+f), wall)
	waitFor(exists(f + ".serving"))
	queued := callAsync(ctx, c, 999, `{"id": 999, "op": "hello"}`, wall)
	waitFor(func() bool { return c.queued() == 2 })
	touch(t, f)
	for _, r := range []struct {
		name    string
		got     result
		culprit bool
	}{{"served", <-served, true}, {"queued", <-queued, false}} {
		lost := lostOf(t, r.name, r.got.err)
		if lost.culprit != r.culprit || lost.reason != "the process ended: exit status 3" {
			t.Errorf("%s: culprit %v, reason %q; want %v, %q", r.name, lost.culprit, lost.reason, r.culprit, "the process ended: exit status 3")
		}
	}
}

// A request whose context ends: never sent when it had ended already; dropped
// without a kill while queued behind another (the reader discards its
// reply); the culprit, the process killed, while it is being served.
func TestCancel(t *testing.T) {
	t.Parallel()
	const wall = time.Minute
	const stopped = "the process was stopped when an episode's budget ended during its request"
	for i, c := range []struct {
		name string
		// cancel is which request's context ends: "served" or "queued".
		cancel string
		// servedErr, queuedErr: "" for a reply, "canceled" for ctx's
		// error, "culprit" or "lost" for a lost request.
		servedErr, queuedErr string
		alive                bool
	}{
		{"queued request cancelled", "queued", "", "canceled", true},
		{"served request cancelled", "served", "canceled", "lost", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			pc, h := faultyConn(t, 110+i, wall, 1)
			f := filepath.Join(t.TempDir(), "go")
			sctx, scancel := context.WithCancel(context.Background())
			defer scancel()
			qctx, qcancel := context.WithCancel(context.Background())
			defer qcancel()
			served := callAsync(sctx, pc, 2000, step(2000, h[0], "blockon:"+f), wall)
			waitFor(exists(f + ".serving"))
			queued := callAsync(qctx, pc, 2001, `{"id": 2001, "op": "hello"}`, wall)
			waitFor(func() bool { return pc.queued() == 2 })
			if c.cancel == "served" {
				scancel()
			} else {
				qcancel()
			}
			check := func(name, want string, r result) {
				switch want {
				case "":
					if r.err != nil {
						t.Errorf("%s: %v, want its reply", name, r.err)
					}
				case "canceled":
					if !errors.Is(r.err, context.Canceled) {
						t.Errorf("%s: %v, want context canceled", name, r.err)
					}
				default:
					lost := lostOf(t, name, r.err)
					if lost.culprit != (want == "culprit") || lost.reason != stopped {
						t.Errorf("%s: culprit %v, reason %q; want %v, %q", name, lost.culprit, lost.reason, want == "culprit", stopped)
					}
				}
			}
			if c.cancel == "queued" {
				check("queued", c.queuedErr, <-queued)
				touch(t, f)
				check("served", c.servedErr, <-served)
				waitFor(func() bool { return pc.queued() == 0 }) // the dropped reply came and went
			} else {
				check("served", c.servedErr, <-served)
				check("queued", c.queuedErr, <-queued)
			}
			if pc.alive() != c.alive {
				t.Errorf("alive %v, want %v", pc.alive(), c.alive)
			}
		})
	}

	t.Run("context ended before the request", func(t *testing.T) {
		pc, _ := faultyConn(t, 119, wall, 0)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := pc.call(ctx, 3000, []byte(`{"id": 3000, "op": "hello"}`), wall); !errors.Is(err, context.Canceled) {
			t.Errorf("call: %v, want context canceled", err)
		}
		if pc.queued() != 0 || !pc.alive() {
			t.Errorf("%d queued, alive %v; want nothing sent, the process alive", pc.queued(), pc.alive())
		}
	})
}

// A request's timeout counts from when the worker starts serving it, not
// from when it was queued: the last of three requests waits longer than
// the timeout behind the other two, each served within it, and all three
// are answered.
func TestRequestTimeoutFromServing(t *testing.T) {
	t.Parallel()
	const wall = 2 * time.Second
	pc, h := faultyConn(t, 120, wall, 2)
	dir := t.TempDir()
	f1, f2 := filepath.Join(dir, "1"), filepath.Join(dir, "2")
	ctx := context.Background()
	first := callAsync(ctx, pc, 4000, step(4000, h[0], "blockon:"+f1), wall)
	waitFor(exists(f1 + ".serving"))
	second := callAsync(ctx, pc, 4001, step(4001, h[1], "blockon:"+f2), wall)
	waitFor(func() bool { return pc.queued() == 2 })
	third := callAsync(ctx, pc, 4002, `{"id": 4002, "op": "hello"}`, wall)
	waitFor(func() bool { return pc.queued() == 3 })
	// Each wait is at least 1.2s (a sleep's lower bound), so the third
	// request waits at least 2.4s, past its 2s timeout, before its turn.
	time.Sleep(1200 * time.Millisecond)
	touch(t, f1)
	waitFor(exists(f2 + ".serving"))
	time.Sleep(1200 * time.Millisecond)
	touch(t, f2)
	for name, ch := range map[string]chan result{"first": first, "second": second, "third": third} {
		if r := <-ch; r.err != nil {
			t.Errorf("%s: %v, want its reply", name, r.err)
		}
	}
}

// A worker that crashes while a child it forked holds stderr open is
// found at once, with its exit status: the process group is killed
// before the wait (without it, the wait lasts the child's hour).
func TestCrashWithChildren(t *testing.T) {
	t.Parallel()
	pc, h := faultyConn(t, 130, time.Hour, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := pc.call(ctx, 5000, []byte(step(5000, h[0], "forkcrash")), time.Hour)
	lost := lostOf(t, "forkcrash", err)
	if !lost.culprit || lost.reason != "the process ended: exit status 3" {
		t.Errorf("culprit %v, reason %q; want true, %q", lost.culprit, lost.reason, "the process ended: exit status 3")
	}
}

// In the sandbox, requests take turns: a request whose context ends
// while it waits for its turn is dropped and the worker lives; the
// request being served when its context ends is the culprit, and the
// one waiting behind it is lost, not blamed.
func TestSandboxTurns(t *testing.T) {
	t.Parallel()
	const wall = time.Minute
	c, h := faultyWorker(t, true, 4096+140, wall, 1) // memory: the sandbox enforces it
	sc := c.(*sandboxConn)
	sctx, scancel := context.WithCancel(context.Background())
	defer scancel()
	served := make(chan error, 1)
	go func() {
		_, err := sc.call(sctx, 6000, []byte(step(6000, h[0], "hang")), wall)
		served <- err
	}()
	waitFor(func() bool { return len(sc.turn) == 1 }) // the hang has the turn

	qctx, qcancel := context.WithCancel(context.Background())
	dropped := make(chan error, 1)
	go func() {
		_, err := sc.call(qctx, 6001, []byte(`{"id": 6001, "op": "hello"}`), wall)
		dropped <- err
	}()
	qcancel()
	if err := <-dropped; !errors.Is(err, context.Canceled) || !sc.alive() {
		t.Errorf("the request cancelled in its wait: %v, alive %v; want context canceled, the worker alive", err, sc.alive())
	}

	queued := make(chan error, 1)
	go func() {
		_, err := sc.call(context.Background(), 6002, []byte(`{"id": 6002, "op": "hello"}`), wall)
		queued <- err
	}()
	scancel()
	if err := <-served; !errors.Is(err, context.Canceled) {
		t.Errorf("the served request: %v, want context canceled", err)
	}
	const stopped = "the process was stopped when an episode's budget ended during its request"
	lost := lostOf(t, "the queued request", <-queued)
	if lost.culprit || lost.reason != stopped {
		t.Errorf("the queued request: culprit %v, reason %q; want false, %q", lost.culprit, lost.reason, stopped)
	}
}
