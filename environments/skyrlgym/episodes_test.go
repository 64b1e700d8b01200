package skyrlgym_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/skyrlgym"
	"github.com/rlpipe/rlpipe/policy"
)

// outcome is what running an episode gave.
type outcome struct {
	res environments.Result
	err error
}

// runAsync runs env's episode id under ctx, the policy replying action.
func runAsync(ctx context.Context, t *testing.T, env environments.Env, id, action string) chan outcome {
	t.Helper()
	r, err := environments.NewRunner(environments.Scripted(func([]policy.Message) string { return action }),
		&environments.RunnerOptions{MaxTurns: 5})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan outcome, 1)
	go func() {
		res, err := r.Run(ctx, env, environments.Episode{ID: id})
		out <- outcome{res, err}
	}()
	return out
}

func makeEnv(t *testing.T, m environments.Maker, id string) environments.Env {
	t.Helper()
	env, err := m(tables.Prompt{PromptID: id, Prompt: "go"})
	if err != nil {
		t.Fatalf("make an env for %s: %v", id, err)
	}
	t.Cleanup(func() { env.End() })
	return env
}

func waitFor(cond func() bool) {
	for !cond() {
		time.Sleep(5 * time.Millisecond)
	}
}

func exists(path string) func() bool {
	return func() bool { _, err := os.Stat(path); return err == nil }
}

// Episodes sharing a worker: the episode whose request the worker was
// serving when it crashed is env_error; one whose request was queued
// behind it is infra_error. An episode cancelled while queued is dropped
// without harm to the one served; one cancelled while served kills the
// worker, and the episode queued behind it is infra_error, not
// env_error.
func TestEpisodesShareAWorker(t *testing.T) {
	t.Parallel() // workers of their own
	const lostInit = "reset: skyrl_gym env faulty:Faulty for prompt b: init: during another episode's request, "
	const lost = ": the episode's skyrl_gym env was lost with its worker: environment infrastructure failure"
	for i, c := range []struct {
		name string
		// a's action ("crashon:F": crash once F exists; "blockon:F":
		// answer once it exists); what ends: "file" (F is made), "a" or
		// "b" (that episode's context is cancelled).
		action, end           string
		aStatus, aError, aCtx string
		bStatus, bError, bCtx string
		restarts              int
	}{
		{"crash while another episode is queued", "crashon:", "file",
			tables.StatusEnvError, "step 0: skyrl_gym env faulty:Faulty for prompt a: step: the process ended: exit status 3: the skyrl_gym worker ended during this episode's request; it restarts for the next one", "",
			tables.StatusInfraError, lostInit + "the process ended: exit status 3" + lost, "", 1},
		{"the queued episode cancelled", "blockon:", "b",
			tables.StatusOK, "", "",
			"", "", "episode b: reset: context canceled", 0},
		{"the served episode cancelled", "blockon:", "a",
			"", "", "episode a: step 0: context canceled",
			tables.StatusInfraError, lostInit + "the process was stopped when an episode's budget ended during its request" + lost, "", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, w := faulty(t, skyrlgym.Options{MemoryMB: 200 + i})
			a, b := makeEnv(t, m, "a"), makeEnv(t, m, "b")
			starts := w.Starts()
			f := filepath.Join(t.TempDir(), "f")
			actx, acancel := context.WithCancel(context.Background())
			defer acancel()
			bctx, bcancel := context.WithCancel(context.Background())
			defer bcancel()
			aout := runAsync(actx, t, a, "a", c.action+f)
			waitFor(exists(f + ".serving"))
			bout := runAsync(bctx, t, b, "b", "ok")
			waitFor(func() bool { return w.Queued() == 2 })
			var ra, rb outcome
			switch c.end {
			case "file":
				os.WriteFile(f, nil, 0o644)
				ra, rb = <-aout, <-bout
			case "a":
				acancel()
				ra, rb = <-aout, <-bout
			case "b":
				// b's runner returns while a's step is still served: its
				// init is dropped (still in flight, its reply to be
				// discarded) and its End's close waits to be sent ahead
				// of the next request, not behind a's step.
				bcancel()
				rb = <-bout
				if q := w.Queued(); q != 2 {
					t.Errorf("%d requests in flight after b returned, want 2 (a's step, b's dropped init)", q)
				}
				os.WriteFile(f, nil, 0o644)
				ra = <-aout
			}
			for _, e := range []struct {
				name                  string
				o                     outcome
				status, error, ctxErr string
			}{{"a", ra, c.aStatus, c.aError, c.aCtx}, {"b", rb, c.bStatus, c.bError, c.bCtx}} {
				if e.ctxErr != "" {
					if e.o.err == nil || e.o.err.Error() != e.ctxErr || !errors.Is(e.o.err, context.Canceled) {
						t.Errorf("episode %s: %v, want %s", e.name, e.o.err, e.ctxErr)
					}
					continue
				}
				if e.o.err != nil || e.o.res.Status() != e.status || errorOf(e.o.res) != e.error {
					t.Errorf("episode %s: %v, status %s, error\n%s\nwant %s,\n%s", e.name, e.o.err, e.o.res.Status(), errorOf(e.o.res), e.status, e.error)
				}
			}
			if res := runOne(t, m, "next", 0, "ok"); res.Status() != tables.StatusOK {
				t.Errorf("the next episode: %s (%s); want ok", res.Status(), errorOf(res))
			}
			if got := w.Starts() - starts; got != c.restarts {
				t.Errorf("%d restarts, want %d", got, c.restarts)
			}
		})
	}

	t.Run("a reset with a dead context", func(t *testing.T) {
		m, w := faulty(t, skyrlgym.Options{MemoryMB: 210})
		env := makeEnv(t, m, "a")
		starts := w.Starts()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := env.Reset(ctx, "a"); !errors.Is(err, context.Canceled) {
			t.Errorf("reset: %v, want context canceled", err)
		}
		if res := runOne(t, m, "next", 0, "ok"); res.Status() != tables.StatusOK || w.Starts() != starts {
			t.Errorf("the next episode: %s (%s) after %d restarts; want ok, none", res.Status(), errorOf(res), w.Starts()-starts)
		}
	})
}

// A make that crashes the worker is the row's fault: the stage fails
// naming the row (ErrRow, not infrastructure), and the make is not
// tried again on a new process.
func TestMakeCrash(t *testing.T) {
	t.Parallel()
	m, w := faulty(t, skyrlgym.Options{MemoryMB: 220})
	starts := w.Starts()
	_, err := m(tables.Prompt{PromptID: "row-3", Prompt: "go", Metadata: `{"crash": "make"}`})
	want := "skyrl_gym env faulty:Faulty for prompt row-3: make: the process ended: exit status 3; the worker ended while making this row's env (it restarts for the next request): prompt row does not make a skyrl_gym env"
	if err == nil || err.Error() != want || !errors.Is(err, skyrlgym.ErrRow) || errors.Is(err, environments.ErrInfra) {
		t.Errorf("make: %v\nwant\n%s", err, want)
	}
	if got := w.Starts(); got != starts {
		t.Errorf("%d starts, then %d; want no retry on a new process", starts, got)
	}
}

// The worker keeps its envs tidy and its request stream to itself: an
// env whose reset failed is closed by End; End never waits behind
// another episode's request (with a's step hanging in the worker, b's
// End returns at once, a is neither killed nor blamed, its request
// timeout far off) and b's env is closed ahead of the worker's next
// request (1 live env at the end, the one asking, not 2 or 3); and a
// subprocess of an env reads an empty stdin, not the requests.
func TestWorkerHygiene(t *testing.T) {
	t.Parallel()
	m, w := faulty(t, skyrlgym.Options{MemoryMB: 230, RequestTimeoutS: 60})
	failed := makeEnv(t, m, "failed")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := failed.Reset(ctx, "failed"); !errors.Is(err, context.Canceled) {
		t.Fatalf("reset: %v, want context canceled", err)
	}
	failed.End()

	a := makeEnv(t, m, "a")
	b, _ := reset(t, m, tables.Prompt{PromptID: "b", Prompt: "go"})
	starts := w.Starts()
	f := filepath.Join(t.TempDir(), "f")
	aout := runAsync(context.Background(), t, a, "a", "blockon:"+f)
	waitFor(exists(f + ".serving"))
	if err := b.End(); err != nil {
		t.Errorf("b's End: %v", err)
	}
	select {
	case o := <-aout:
		t.Fatalf("a's episode ended before its step was released: %v, %s (%s)", o.err, o.res.Status(), errorOf(o.res))
	default:
	}
	if q := w.Queued(); q != 1 {
		t.Errorf("%d requests in flight after b's End, want 1 (a's step; b's close waits for the next request)", q)
	}
	os.WriteFile(f, nil, 0o644)
	if o := <-aout; o.err != nil || o.res.Status() != tables.StatusOK {
		t.Errorf("a's episode: %v, %s (%s); want ok", o.err, o.res.Status(), errorOf(o.res))
	}

	for _, c := range []struct{ action, obs string }{
		{"live", "1 live"},
		{"stdin", "stdin had 0 bytes"},
	} {
		env, _ := reset(t, m, tables.Prompt{PromptID: c.action, Prompt: "go"})
		got := play(t, env, c.action)
		if len(got) != 1 || got[0].Observation != c.obs {
			t.Errorf("%s: steps %+v, want the observation %q", c.action, got, c.obs)
		}
		env.End()
	}
	if got := w.Starts(); got != starts {
		t.Errorf("%d restarts, want none", got-starts)
	}
}
