package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
)

// raceWindow is the commit window of the fault that stands in for
// lakeFS's staged-read race in these tests.
const raceWindow = 250 * time.Millisecond

// lakeFSStandIn is a store (with the arithmetic dataset) served through
// a store server with faults; remote runs commands on it through the
// lakeFS backend, with the process environment naming the server.
type lakeFSStandIn struct {
	local  *harness // the embedded store behind the server
	remote *harness
	st     *local.Store
	srv    *storeserver.Server
}

func newLakeFSStandIn(t *testing.T, faults storeserver.Faults) *lakeFSStandIn {
	t.Helper()
	h := newStore(t)
	h.ok("dataset", "arith", "main", "--train", "256", "--heldout", "50")
	st := h.openStore()
	srv, err := storeserver.New(context.Background(), st, &storeserver.Options{Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(lakefs.EnvAccessKeyID, "")
	t.Setenv(lakefs.EnvSecretAccessKey, "")
	return &lakeFSStandIn{
		local:  h,
		remote: &harness{t: t, dir: h.dir, store: "lakefs://" + srv.Repository(), env: map[string]string{}},
		st:     st,
		srv:    srv,
	}
}

// serve serves the stand-in on a test server for the rest of the test.
func (s *lakeFSStandIn) serve(t *testing.T) {
	hs := httptest.NewServer(s.srv)
	t.Cleanup(hs.Close)
	t.Setenv(lakefs.EnvEndpoint, hs.URL)
}

// wantSameRun fails unless the stand-in's run branch holds exactly the
// iteration and eval artifacts of want (an uninterrupted run on the
// embedded store).
func (s *lakeFSStandIn) wantSameRun(t *testing.T, want map[string]string) {
	t.Helper()
	got := runSums(t, s.local.store, runs.Branch("arith"))
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("%d artifacts through lakeFS, %d direct", len(got), len(want))
	}
	for p, sum := range want {
		if got[p] != sum {
			t.Errorf("%s differs through lakeFS (%s, want %s)", p, got[p], sum)
		}
	}
}

// directArith runs the small arithmetic loop on the embedded store and
// returns its config and its artifacts' checksums.
func directArith(t *testing.T) (src string, sums map[string]string) {
	t.Helper()
	src = smallArithConfig(t)
	h := newStore(t)
	h.ok("dataset", "arith", "main", "--train", "256", "--heldout", "50")
	h.ok("run", "-f", h.file("pipeline.yaml", src), "--no-report")
	return src, runSums(t, h.store, runs.Branch("arith"))
}

// The overlapped arithmetic loop with evaluations, run through the
// lakeFS backend against a store server that answers reads of staged
// objects with 404 as lakeFS does to a read racing a commit, finishes
// without a rerun and writes exactly the artifacts of the same run on
// the embedded store. Two faults: every read during every commit, and
// the first read of every staged object.
func TestArithmeticRunThroughALakeFSThatMissesStagedReads(t *testing.T) {
	src, want := directArith(t)
	for _, faults := range []storeserver.Faults{{CommitWindow: raceWindow}, {MissStagedOnce: true}} {
		t.Run(faults.String(), func(t *testing.T) {
			s := newLakeFSStandIn(t, faults)
			s.serve(t)
			out := s.remote.ok("run", "-f", s.local.file("pipeline.yaml", src), "--no-report")
			if !strings.Contains(out, "iteration 4 of 4 committed") {
				t.Fatalf("run through lakeFS:\n%s", out)
			}
			t.Logf("%d reads missed", s.srv.FaultMisses())
			s.wantSameRun(t, want)
		})
	}
}

// `rlpipe run` through the lakeFS backend, against a stand-in whose
// commits race staged reads, SIGKILLed at random moments and run again
// until it finishes, writes exactly the artifacts of an uninterrupted
// run on the embedded store.
func TestKillAndResumeThroughALakeFS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the GRPO loop several times")
	}
	src, want := directArith(t)
	s := newLakeFSStandIn(t, storeserver.Faults{CommitWindow: raceWindow})
	s.serve(t)
	// Kill once the run has committed one more iteration than before: a
	// kill mid-run on any machine, whatever its speed.
	kills := runLegs(t, 20, 2, func(done chan error) bool {
		before, err := committedIterations(s.st)
		if err != nil {
			t.Fatal(err)
		}
		return waitForCommit(s.st, before, done)
	}, "--store", s.remote.store, "--log-level", "error", "run", "-f", s.local.file("pipeline.yaml", src), "--no-report")
	if kills == 0 {
		t.Fatalf("the run finished before it could be killed")
	}
	t.Logf("%d kills, %d reads missed", kills, s.srv.FaultMisses())
	s.wantSameRun(t, want)
}

// committedIterations is how many iteration commits the arithmetic run
// branch has (0 when the branch does not exist yet).
func committedIterations(st *local.Store) (int, error) {
	n := 0
	for c, err := range st.Log(context.Background(), runs.Branch("arith"), nil) {
		if errors.Is(err, artifacts.ErrNotFound) {
			return 0, nil
		}
		if err != nil {
			return n, err
		}
		if c.Metadata["rlpipe.iteration"] != "" {
			n++
		}
	}
	return n, nil
}

// waitForCommit polls until the run branch has more than before
// iteration commits (true) or the process has ended (false, its result
// put back on done).
func waitForCommit(st *local.Store, before int, done chan error) bool {
	for {
		select {
		case err := <-done:
			done <- err
			return false
		case <-time.After(20 * time.Millisecond):
		}
		if n, err := committedIterations(st); err == nil && n > before {
			return true
		}
	}
}

// A lakeFS server restarted mid-run (it stops listening, and listens
// again two seconds later) does not lose a thing: the lakeFS backend
// sends what never reached the server again, so the run usually goes on;
// a write cut off on a connection the server was closing stops it with a
// clear error, and the same command resumes it. Either way the run ends
// with the artifacts of an uninterrupted one.
func TestRunGoesOnThroughALakeFSRestart(t *testing.T) {
	src, want := directArith(t)
	s := newLakeFSStandIn(t, storeserver.Faults{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The restart begins once the second iteration's commit is answered,
	// with two iterations still to run: the run meets the outage whatever
	// the machine's speed.
	var commits atomic.Int32
	commitPath := "/branches/" + runs.Branch("arith") + "/commits"
	rs := &restarting{addr: l.Addr().String(), restarted: make(chan struct{})}
	rs.h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.srv.ServeHTTP(w, r)
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, commitPath) && commits.Add(1) == 2 {
			go func() {
				if err := rs.restart(2 * time.Second); err != nil {
					t.Error(err)
				}
			}()
		}
	})
	go rs.serve(l)
	t.Cleanup(rs.close)
	t.Setenv(lakefs.EnvEndpoint, "http://"+rs.addr)

	cfg := s.local.file("pipeline.yaml", src)
	first := s.remote.run("run", "-f", cfg, "--no-report")
	out := first.stdout
	if first.code != ExitOK {
		// A request the server had taken when it went down (a write on a
		// connection it was closing) is not sent again: the run stops
		// with the error and a hint, and the same command resumes it.
		if !strings.Contains(first.stderr, "connection") || !strings.Contains(first.stderr, "run the same command again") {
			t.Fatalf("the run stopped at the restart without a clear error and hint:\n%s", first.stderr)
		}
		t.Logf("the run stopped at the restart (a request cut off); resuming it")
		out = s.remote.ok("run", "-f", cfg, "--no-report")
	}
	select {
	case <-rs.restarted:
	default:
		t.Fatalf("the server was not restarted during the run:\n%s", out)
	}
	if !strings.Contains(out, "iteration 4 of 4 committed") {
		t.Fatalf("run through a restarting lakeFS:\n%s", out)
	}
	s.wantSameRun(t, want)
}

// restarting serves h on addr and, when asked, restarts as a server
// does: it stops listening, lets requests in flight finish, and after a
// pause listens on addr again.
type restarting struct {
	addr      string
	h         http.Handler
	restarted chan struct{} // closed once it listens again

	mu  sync.Mutex
	srv *http.Server
}

func (r *restarting) serve(l net.Listener) {
	srv := &http.Server{Handler: r.h}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	srv.Serve(l)
}

func (r *restarting) restart(pause time.Duration) error {
	r.mu.Lock()
	srv := r.srv
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return err
	}
	time.Sleep(pause)
	l, err := net.Listen("tcp", r.addr)
	if err != nil {
		return fmt.Errorf("listen again on %s: %w", r.addr, err)
	}
	close(r.restarted)
	go r.serve(l)
	return nil
}

func (r *restarting) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.srv.Close()
}

// Wrong credentials stop `rlpipe run` at once with an error that names
// the variables to fix and never their values.
func TestWrongLakeFSCredentials(t *testing.T) {
	h := newStore(t)
	st := h.openStore()
	srv, err := storeserver.New(context.Background(), st, &storeserver.Options{AccessKeyID: "AKIARIGHTKEY00000000", SecretAccessKey: "the-right-secret-value"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	const wrongSecret = "a-wrong-secret-value-9f8e7d"
	t.Setenv(lakefs.EnvEndpoint, hs.URL)
	t.Setenv(lakefs.EnvAccessKeyID, "AKIAWRONGKEY00000000")
	t.Setenv(lakefs.EnvSecretAccessKey, wrongSecret)
	remote := &harness{t: t, dir: h.dir, store: "lakefs://" + srv.Repository(), env: map[string]string{lakefs.EnvSecretAccessKey: wrongSecret}}
	stderr := remote.fails(ExitFailure, []string{lakefs.EnvAccessKeyID, lakefs.EnvSecretAccessKey},
		"run", "-f", h.file("pipeline.yaml", smallArithConfig(t)), "--no-report")
	if strings.Contains(stderr, wrongSecret) || strings.Contains(stderr, "the-right-secret-value") {
		t.Errorf("a secret reached stderr:\n%s", stderr)
	}
}
