package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/internal/configtest"
)

// vllmPipeline is examples/arithmetic-vllm/pipeline.yaml sampling from
// url, cut to two iterations of 16 prompts, eval samples 4 a problem, a
// short task backoff, and room for every request and for generate and
// the evaluation at once, on any number of cores; more replaces further
// text.
func vllmPipeline(t *testing.T, url string, more map[string]string) string {
	t.Helper()
	repl := map[string]string{
		"http://127.0.0.1:8011":           url,
		"spec: ../arithmetic/reward.yaml": "spec: " + configtest.Abs(t, "../examples/arithmetic/reward.yaml"),
		"iterations: 20":                  "iterations: 2",
		"  n: 16":                         "  n: 4",
		"k: [1, 4, 16]":                   "k: [1, 4]",
		"concurrency: 4":                  "concurrency: 64",
		"backoff: 1s}}":                   "backoff: 10ms}, resources: {cpu: 0.1}}",
		"eval: {}":                        "eval: {resources: {cpu: 0.1}}",
	}
	for k, v := range more {
		repl[k] = v
	}
	return configtest.Edit(t, "examples/arithmetic-vllm/pipeline.yaml", readFile(t, "../examples/arithmetic-vllm/pipeline.yaml"), repl)
}

// runEvents are the engine's events in a run's stderr (JSON lines).
type runEvent struct {
	Event     string `json:"event"`
	Task      string `json:"task"`
	Iteration int    `json:"iteration"`
	Error     string `json:"error"`
}

func runEvents(t *testing.T, stderr string) []runEvent {
	t.Helper()
	var out []runEvent
	for _, line := range strings.Split(stderr, "\n") {
		var e runEvent
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &e) == nil && e.Event != "" {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no events in the run's stderr:\n%s", stderr)
	}
	return out
}

// checkStopped checks what a run that stopped on a failed task leaves in
// its events: every call that started ended (finished, failed or
// cancelled), and every cancelled call names, as its cause, a call that
// failed. It returns the calls that failed.
func checkStopped(t *testing.T, evs []runEvent) map[string]bool {
	t.Helper()
	last := map[string]string{}
	failed := map[string]bool{}
	for _, e := range evs {
		if e.Task == "" {
			continue
		}
		call := fmt.Sprintf("task %s (iteration %06d)", e.Task, e.Iteration)
		last[call] = e.Event
		if e.Event == "task.failed" {
			failed[call] = true
		}
	}
	for call, k := range last {
		switch k {
		case "task.finished", "task.failed", "task.cached":
		case "task.cancelled":
		default:
			t.Errorf("%s was still running when the run returned (last event %s)", call, k)
		}
	}
	for _, e := range evs {
		if e.Event == "task.cancelled" {
			cause, ok := strings.CutPrefix(e.Error, "stopped: ")
			if !ok || !failed[strings.TrimSuffix(cause, " failed")] {
				t.Errorf("%s (iteration %d) cancelled with cause %q: want a failed task named", e.Task, e.Iteration, e.Error)
			}
		}
	}
	return failed
}

func countEvents(evs []runEvent, event, task string, iteration int) int {
	n := 0
	for _, e := range evs {
		if e.Event == event && e.Task == task && e.Iteration == iteration {
			n++
		}
	}
	return n
}

// A policy endpoint where nothing listens: the run stops on the first
// task that fails for good, says which endpoint refused and what to do,
// exits 1, and leaves nothing running: the evaluation in flight beside
// generate, and the overlapped next generation, are cancelled or failed
// on their own — never waited out.
func TestRunPolicyEndpointRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()

	h := newStore(t)
	h.ok("dataset", "arith", "main", "--train", "64", "--heldout", "8")
	cfg := h.file("pipeline.yaml", vllmPipeline(t, url, nil))
	r := h.run("run", "-f", cfg, "--no-report")
	if r.code != ExitFailure {
		t.Fatalf("exit %d, want %d\n%s", r.code, ExitFailure, r.stderr)
	}
	msg := r.stderr[strings.LastIndex(r.stderr, "rlpipe: run arith-vllm: stopped after iteration 0: "):]
	for _, want := range []string{
		"failed after ", "every one of the ", "POST " + url + "/v1/completions: dial tcp ", "connection refused",
		"; next: start the server at " + url + " (e.g. vllm serve or rlpipe policy serve), or remove it from the endpoints",
		"\nhint: fix the cause and run the same command again: it resumes, and finished tasks are cache hits",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the run's error does not say %q:\n%s", want, msg)
		}
	}
	evs := runEvents(t, r.stderr)
	failed := checkStopped(t, evs)
	// Generate of iteration 1 runs its 3 attempts unless a failure in
	// iteration 1 (the evaluation's) cancelled it first.
	gen := countEvents(evs, "task.started", "generate", 1)
	genFailed := failed["task generate (iteration 000001)"]
	genCancelled := countEvents(evs, "task.cancelled", "generate", 1) == 1
	if genFailed == genCancelled || (genFailed && gen != 3) || gen > 3 {
		t.Errorf("generate of iteration 1: %d attempts, failed %t, cancelled %t: want 3 attempts and a failure, or a cancellation", gen, genFailed, genCancelled)
	}
	if len(failed) == 0 {
		t.Errorf("no task failed:\n%s", r.stderr)
	}
}

// A policy endpoint that is some other web server (404 pages for
// generations) while the evaluation's requests hang: generate fails after
// the 3 attempts of its retry policy, and the run cancels the evaluation
// at once — its HTTP requests end on the client's side — and reports
// generate's failure alone.
func TestRunPolicyEndpointNotOpenAI(t *testing.T) {
	const page = "<html><body><h1>Not Found</h1></body></html>"
	const evalRequests = 8 // the held-out problems
	var mu sync.Mutex
	held, dropped, answered := 0, 0, 0
	allHeld := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			N int `json:"n"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		if r.URL.Path == "/v1/completions" && body.N == 4 { // the evaluation: hang
			mu.Lock()
			if held++; held == evalRequests {
				close(allHeld)
			}
			mu.Unlock()
			select {
			case <-r.Context().Done(): // the client gave up the request
				mu.Lock()
				dropped++
				mu.Unlock()
			case <-time.After(time.Minute): // a safety stop: the test fails below
				mu.Lock()
				answered++
				mu.Unlock()
			}
			return
		}
		// Generate fails once the whole evaluation is in flight.
		select {
		case <-allHeld:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, page)
	}))
	defer srv.Close()

	h := newStore(t)
	h.ok("dataset", "arith", "main", "--train", "64", "--heldout", "8")
	// On-policy: iteration 2 waits for iteration 1, so the evaluation is
	// the one call beside generate.
	cfg := h.file("pipeline.yaml", vllmPipeline(t, srv.URL, map[string]string{"max_staleness: 1": "max_staleness: 0"}))
	r := h.run("run", "-f", cfg, "--no-report")
	if r.code != ExitFailure {
		t.Fatalf("exit %d, want %d\n%s", r.code, ExitFailure, r.stderr)
	}
	msg := r.stderr[strings.LastIndex(r.stderr, "rlpipe: "):]
	for _, want := range []string{
		"rlpipe: run arith-vllm: stopped after iteration 0: task generate (iteration 000001) failed after 3 attempt(s): generate iteration 1: every one of the 128 samples failed",
		"POST " + srv.URL + "/v1/completions: 404 Not Found: " + page,
		"next: " + srv.URL + " answers, but not with the OpenAI API's JSON: check the endpoint's host and port",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the run's error does not say %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "eval-generate") {
		t.Errorf("the run's error reports the cancelled evaluation:\n%s", msg)
	}
	evs := runEvents(t, r.stderr)
	failed := checkStopped(t, evs)
	if len(failed) != 1 || !failed["task generate (iteration 000001)"] {
		t.Errorf("failed tasks %v: want generate of iteration 1 alone", failed)
	}
	if n := countEvents(evs, "task.started", "generate", 1); n != 3 {
		t.Errorf("generate of iteration 1 started %d attempts, want 3 (its retry policy)", n)
	}
	if n := countEvents(evs, "task.cancelled", "eval-generate-start", 1); n != 1 {
		t.Errorf("the evaluation of the base policy was cancelled %d times, want once", n)
	}
	srv.Close() // waits for the handlers
	mu.Lock()
	defer mu.Unlock()
	if held != evalRequests || dropped != held || answered != 0 {
		t.Errorf("the server held %d evaluation requests, %d dropped by the client, %d waited out: want %d, all dropped", held, dropped, answered, evalRequests)
	}
}
