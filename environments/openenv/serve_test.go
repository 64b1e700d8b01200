package openenv_test

import (
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/openenv"
)

// serveOptions serve one of testdata's apps with the openenv venv.
func serveOptions(t *testing.T, app string, timeoutS float64) *openenv.Options {
	t.Helper()
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	return &openenv.Options{Serve: &openenv.ServeOptions{App: app, Python: venv(t), Cwd: dir, StartTimeoutS: timeoutS, IdleStopS: -1}}
}

// TestServeFaults: servers that do not start fail the episode as infra,
// with the server's stderr and what to do; the start is not retried.
func TestServeFaults(t *testing.T) {
	port := regexp.MustCompile(`127\.0\.0\.1:\d+`)
	for _, c := range []struct {
		name   string
		opts   *openenv.Options
		prefix string
		has    string
	}{
		{"an app that does not import", serveOptions(t, "broken_app:app", 0),
			"serve broken_app:app: the server exited before /health answered (exit status 1); its stderr ends: ",
			"ModuleNotFoundError: No module named 'openenv_module_that_is_not_there'"},
		{"health that does not answer in time", serveOptions(t, "slow_app:app", 1),
			"serve slow_app:app: http://127.0.0.1:PORT/health did not answer within 1s; its stderr ends: (nothing): raise rl_options serve: {start_timeout_s: ...} or fix the app", ""},
		{"no such python", &openenv.Options{Serve: &openenv.ServeOptions{App: "a:app", Python: "/nonexistent/python"}},
			"serve a:app: start /nonexistent/python: fork/exec /nonexistent/python: no such file or directory: " +
				"set rl_options serve: {python: ...} to a Python (or venv) with openenv and uvicorn (scripts/openenv-venv.sh makes .venv-openenv)", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := openenv.SharedRemote(c.opts, "")
			if err != nil {
				t.Fatal(err)
			}
			env := open(t, c.opts)
			_, err = env.Reset(context.Background(), "e")
			if err == nil {
				t.Fatal("Reset: no error")
			}
			msg := port.ReplaceAllString(err.Error(), "127.0.0.1:PORT")
			if !strings.HasPrefix(msg, c.prefix) || !strings.Contains(msg, c.has) {
				t.Errorf("Reset: %s\nwant %s…%s", msg, c.prefix, c.has)
			}
			if !errors.Is(err, openenv.ErrStart) || !errors.Is(err, environments.ErrInfra) {
				t.Errorf("%v: want ErrStart, infra", err)
			}
			if _, again := env.Reset(context.Background(), "e2"); again == nil || again.Error() != err.Error() {
				t.Errorf("a second Reset: %v, want the same error", again)
			}
			if n, want := r.Starts(), map[bool]int{true: 0, false: 1}[strings.Contains(c.name, "python")]; n != want {
				t.Errorf("%d starts, want %d (no retry)", n, want)
			}
		})
	}
}

// TestServeRestart: a served server that dies during an episode's step
// fails that episode as env_error (the environment crashed on its
// action: retrying it as infra would crash it again), with the exit and
// stderr; another episode in flight, not in a step then, fails as infra.
// The next episode restarts it. A caller whose ctx ends during the
// start does not kill the start. With idle_stop_s < 0 the server stops
// when the last episode ends, and the next episode starts it again.
func TestServeRestart(t *testing.T) {
	opts := serveOptions(t, "dying_app:app", 0)
	r, err := openenv.SharedRemote(opts, "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n0 := r.Starts() // the server is the process's: -count=N runs it again
	ctx := context.Background()
	short, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	if err := r.Start(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start with a 1ms ctx: %v, want its deadline", err)
	}
	env := open(t, opts)
	if obs, err := env.Reset(ctx, "a"); err != nil || obs != "ready" {
		t.Fatalf("Reset: %q, %v", obs, err)
	}
	if n := r.Starts() - n0; n != 1 {
		t.Errorf("%d starts after the abandoned wait, want 1 (the start went on)", n)
	}
	// Another episode in flight keeps the server up across the death.
	other := open(t, opts)
	if _, err := other.Reset(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	_, err = env.Step(ctx, "die")
	port := regexp.MustCompile(`127\.0\.0\.1:\d+`)
	want := "step 1 of episode a on ws://127.0.0.1:PORT/ws: the connection failed: EOF: the server exited (exit status 3) during this step; its stderr ends: dying on purpose: " +
		"the environment crashed on this action (rlpipe restarts it for the next episode)"
	if err == nil || port.ReplaceAllString(err.Error(), "127.0.0.1:PORT") != want {
		t.Fatalf("Step: %v\nwant %s", err, want)
	}
	if !errors.Is(err, openenv.ErrEnvironment) || errors.Is(err, environments.ErrInfra) {
		t.Errorf("%v: want ErrEnvironment, not infra", err)
	}
	_, err = other.Step(ctx, "hi")
	want = "step 1 of episode other on ws://127.0.0.1:PORT/ws: the connection failed: EOF: the server exited (exit status 3); its stderr ends: dying on purpose; rlpipe restarts it for the next episode"
	if err == nil || port.ReplaceAllString(err.Error(), "127.0.0.1:PORT") != want {
		t.Fatalf("the other episode's Step: %v\nwant %s", err, want)
	}
	if !errors.Is(err, openenv.ErrConnection) || !errors.Is(err, environments.ErrInfra) {
		t.Errorf("%v: want ErrConnection, infra", err)
	}
	env.End()
	other.End() // the last episode: the server stops (idle_stop_s -1)
	for i, id := range []string{"b", "c"} {
		if obs, err := env.Reset(ctx, id); err != nil || obs != "ready" {
			t.Fatalf("Reset(%s) after the death: %q, %v", id, obs, err)
		}
		st, err := env.Step(ctx, "hi")
		if err != nil || st.Observation != "hi" || !st.Done {
			t.Fatalf("Step: %+v, %v", st, err)
		}
		env.End()
		if n := r.Starts() - n0; n != 2+i {
			t.Errorf("after episode %s: %d starts, want %d", id, n, 2+i)
		}
	}
}
