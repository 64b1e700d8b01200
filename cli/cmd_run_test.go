package cli

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/pipeline"
)

// examplePipeline is examples/standin/pipeline.yaml scaled down: three
// iterations, short sleeps, and a sample stage that is a command holding
// a secret in its environment.
func examplePipeline(t *testing.T, sleep string) string {
	t.Helper()
	s := readFile(t, "../examples/standin/pipeline.yaml")
	for _, d := range []string{"100ms", "200ms", "1s"} {
		s = strings.ReplaceAll(s, "sleep: "+d, "sleep: "+sleep)
	}
	s = strings.Replace(s, "iterations: 6", "iterations: 3", 1)
	s = strings.Replace(s, "  sample:   {kind: standin, sleep: "+sleep+"}",
		`  sample:
    kind: command
    command: [cp, "{{inputs.dataset}}", "{{outputs.prompts}}"]
    outputs: [{name: prompts, file: prompts.parquet}]
    environment: {JUDGE_API_KEY: hunter2-secret, MODE: copy}`, 1)
	if !strings.Contains(s, "hunter2-secret") || strings.Contains(s, "sleep: 1s") {
		t.Fatalf("the example changed; update this test:\n%s", s)
	}
	return s
}

// newRunHarness is a store holding the example's prompts, and the scaled
// pipeline in pipeline.yaml.
func newRunHarness(t *testing.T, sleep string) (*harness, string) {
	t.Helper()
	h := newStore(t)
	h.ok("import", "../examples/standin/prompts.jsonl", "main:data/prompts.parquet", "--table", "prompts")
	h.ok("commit", "main", "-m", "add prompts")
	return h, h.file("pipeline.yaml", examplePipeline(t, sleep))
}

func TestRunEndToEnd(t *testing.T) {
	h, cfg := newRunHarness(t, "10ms")

	var first runOut
	h.json(&first, "run", "-f", cfg)
	if first.Run != "standin" || first.Branch != "runs-standin" || first.Iterations != 3 || first.NewIterations != 3 ||
		first.Tasks != 15 || first.Cached != 0 || first.Attempts != 15 || first.Retries != 0 || first.Cursor != 24 ||
		first.Commit == "" || !strings.HasPrefix(first.ConfigHash, "sha256:") {
		t.Errorf("first run: %+v", first)
	}

	// The recorded config: redacted, with its hash, committed.
	recorded := h.ok("cat", "runs-standin@:run/config.yaml")
	if strings.Contains(recorded, "hunter2") {
		t.Errorf("run/config.yaml holds the secret:\n%s", recorded)
	}
	for _, want := range []string{"JUDGE_API_KEY: <redacted>", "MODE: copy", "# config-hash: " + first.ConfigHash, "run: standin"} {
		if !strings.Contains(recorded, want) {
			t.Errorf("run/config.yaml lacks %q:\n%s", want, recorded)
		}
	}
	if strings.Contains(recorded, "store:") {
		t.Errorf("run/config.yaml records the local store:\n%s", recorded)
	}

	// Running it again resumes: nothing left to do.
	var again runOut
	h.json(&again, "run", "-f", cfg)
	if again.Iterations != 3 || again.NewIterations != 0 || again.Tasks != 0 || again.Commit != first.Commit {
		t.Errorf("second run: %+v", again)
	}
	if out := h.ok("diff", "runs-standin@", "runs-standin"); strings.TrimSpace(out) != "" && !strings.Contains(out, "no changes") {
		t.Errorf("the run branch has staged changes after a resumed run:\n%s", out)
	}

	// Another run of the same pipeline reuses every result.
	var other runOut
	h.json(&other, "run", "-f", cfg, "--run", "other")
	if other.Run != "other" || other.Iterations != 3 || other.NewIterations != 3 || other.Tasks != 15 || other.Cached != 15 ||
		other.Attempts != 0 || other.ConfigHash != first.ConfigHash {
		t.Errorf("run other: %+v", other)
	}

	// Text output: the summary and the report's path (in the store's
	// directory by default).
	out := h.ok("run", "-f", cfg)
	report := filepath.Join(h.store, "reports", "standin.html")
	if !strings.HasPrefix(out, "run standin: iteration 3 of 3 committed as "+shortID(first.Commit)+" (0 new; 0 tasks, 0 cached, 0 attempts) in ") ||
		!strings.HasSuffix(out, "\nreport: "+report+"\n") || strings.Count(out, "\n") != 2 {
		t.Errorf("text summary: %q", out)
	}
	if b, err := os.ReadFile(report); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("report %s: %v (%d bytes)", report, err, len(b))
	}

	// status lists both runs.
	var list statusListOut
	h.json(&list, "status")
	if len(list.Runs) != 2 {
		t.Fatalf("status: %+v", list)
	}
	r := list.Runs[1]
	if r.Run != "standin" || r.Branch != "runs-standin" || r.Iteration != 3 || r.Commit != first.Commit || r.Lock != nil || r.Date.IsZero() {
		t.Errorf("status row: %+v", r)
	}

	// status RUN shows the iterations and the state.
	var st runStatusOut
	h.json(&st, "status", "standin")
	if st.Run != "standin" || st.Branch != "runs-standin" || st.Commit != first.Commit || st.ConfigHash != first.ConfigHash || st.Lock != nil {
		t.Errorf("status standin: %+v", st)
	}
	if st.State == nil || st.State.Iteration != 3 || st.State.Cursor != 24 || st.State.Seed != 7 ||
		st.State.Adapters["3"] != "iterations/000003/adapter" || st.State.Adapters["2"] != "iterations/000002/adapter" {
		t.Errorf("state: %+v", st.State)
	}
	if len(st.Iterations) != 3 {
		t.Fatalf("iterations: %+v", st.Iterations)
	}
	for i, it := range st.Iterations {
		if it.Iteration != i+1 || it.Tasks != 5 || it.Ran != 5 || it.Cached != 0 || it.Attempts != 5 || it.Commit == "" || it.Date.IsZero() {
			t.Errorf("iteration row %d: %+v", i, it)
		}
	}
	if st.Iterations[2].Commit != first.Commit {
		t.Errorf("iteration 3 commit %s, want %s", st.Iterations[2].Commit, first.Commit)
	}
	var so runStatusOut
	h.json(&so, "status", "other")
	for _, it := range so.Iterations {
		if it.Cached != 5 || it.Ran != 0 || it.Attempts != 0 {
			t.Errorf("run other, iteration row: %+v", it)
		}
	}
	text := h.ok("status", "standin")
	for _, want := range []string{"run standin (branch runs-standin) at " + shortID(first.Commit), "state: iteration 3, cursor 24, adapters 1=iterations/000001/adapter 2=iterations/000002/adapter 3=iterations/000003/adapter", "ITERATION"} {
		if !strings.Contains(text, want) {
			t.Errorf("status text lacks %q:\n%s", want, text)
		}
	}
	h.fails(ExitFailure, []string{`no run "nope"`}, "status", "nope")
}

// TestRunEvents: a caller of Main sees, through WithRunEvents, every
// task's start and end and every commit of the run, by iteration.
func TestRunEvents(t *testing.T) {
	h, cfg := newRunHarness(t, "1ms")
	var mu sync.Mutex
	seen := map[string]int{}
	events := WithRunEvents(func(e pipeline.Event) {
		mu.Lock()
		defer mu.Unlock()
		seen[fmt.Sprintf("%d %s", e.Iteration, e.Kind)]++
	})
	var out, errb bytes.Buffer
	if code := Main([]string{"--store", h.store, "run", "-f", cfg, "-o", "json"}, nil, &out, &errb, events); code != ExitOK {
		t.Fatalf("run: exit %d\n%s", code, errb.String())
	}
	want := map[string]int{}
	for n := 1; n <= 3; n++ {
		want[fmt.Sprintf("%d %s", n, pipeline.EventStarted)] = 5
		want[fmt.Sprintf("%d %s", n, pipeline.EventFinished)] = 5
		want[fmt.Sprintf("%d %s", n, pipeline.EventCommitted)] = 1
	}
	if !maps.Equal(seen, want) {
		t.Errorf("events seen by iteration and kind: %v, want %v", seen, want)
	}
}

func TestRunNoCache(t *testing.T) {
	h, cfg := newRunHarness(t, "1ms")
	h.ok("run", "-f", cfg)
	var out runOut
	h.json(&out, "run", "-f", cfg, "--run", "fresh", "--no-cache")
	if out.Cached != 0 || out.Tasks != 15 || out.Attempts != 15 {
		t.Errorf("--no-cache: %+v", out)
	}
}

func TestRunConfigErrors(t *testing.T) {
	h := newStore(t)
	bad := h.file("bad.yaml", strings.Replace(examplePipeline(t, "1ms"), "  train:\n", "  train:\n    retires: {attempts: 2}\n", 1))
	h.fails(ExitFailure, []string{filepath.Base(bad) + ":", `unknown key "retires" in environments.train (did you mean "retries"?)`}, "run", "-f", bad)
	h.fails(ExitFailure, []string{"read pipeline config"}, "run", "-f", filepath.Join(h.dir, "missing.yaml"))
	noName := h.file("noname.yaml", strings.Replace(examplePipeline(t, "1ms"), "run: standin\n", "", 1))
	h.fails(ExitUsage, []string{"name the run with --run NAME"}, "run", "-f", noName)
	h.fails(ExitUsage, []string{`unexpected argument "extra"`}, "run", "-f", noName, "extra")
}

// TestRunBatchLargerThanDataset: 40 prompts cannot make batches of 64
// without repeating a prompt; `rlpipe run` says so before it starts,
// at the key, and leaves no run behind.
func TestRunBatchLargerThanDataset(t *testing.T) {
	h, _ := newRunHarness(t, "1ms")
	big := h.file("big.yaml", strings.Replace(examplePipeline(t, "1ms"), "batch_size: 8 ", "batch_size: 64", 1))
	h.fails(ExitFailure, []string{"big.yaml:13:1: batch_size 64 is more than the 40 prompts of dataset main:data/prompts.parquet, and a batch holds each prompt at most once: lower batch_size to at most 40, or add prompts to the dataset\n"},
		"run", "-f", big, "--no-report")
	var list statusListOut
	h.json(&list, "status")
	if len(list.Runs) != 0 {
		t.Errorf("the refused run left runs behind: %+v", list.Runs)
	}
}

// holdRun takes run name's lock in store as another process would; the
// caller releases it with Close.
func holdRun(t *testing.T, store, name string) *pipeline.Run {
	t.Helper()
	ctx := context.Background()
	st, err := artifacts.Open(ctx, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	held, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return held
}

// TestRunLocked holds a run's lock as another process would and checks
// that `rlpipe run` refuses, naming the holder, and runs once it is free.
func TestRunLocked(t *testing.T) {
	h, cfg := newRunHarness(t, "1ms")
	held := holdRun(t, h.store, "standin")
	host, _ := os.Hostname()
	h.fails(ExitFailure, []string{"run is locked by another process: run standin is held by pid " + itoa(os.Getpid()) + " on " + host}, "run", "-f", cfg)

	var list statusListOut
	h.json(&list, "status")
	if len(list.Runs) != 1 || list.Runs[0].Lock == nil || list.Runs[0].Lock.PID != os.Getpid() || list.Runs[0].Lock.Host != host || !list.Runs[0].Lock.Alive {
		t.Errorf("status of a locked run: %+v", list.Runs)
	}
	if out := h.ok("status"); !strings.Contains(out, "pid "+itoa(os.Getpid())+" on "+host) {
		t.Errorf("status text lacks the holder:\n%s", out)
	}

	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	h.ok("run", "-f", cfg)
}

// TestRunInterrupted cancels a run (Ctrl-C) and checks that it exits 1,
// releases the lock, and that running again finishes the loop.
func TestRunInterrupted(t *testing.T) {
	h, cfg := newRunHarness(t, "300ms")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(500 * time.Millisecond)
		cancel()
	}()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"--store", h.store, "run", "-f", cfg}, environ{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }})
	if code != ExitFailure {
		t.Fatalf("interrupted run: exit %d\n%s", code, errb.String())
	}
	var list statusListOut
	h.json(&list, "status")
	for _, r := range list.Runs {
		if r.Lock != nil {
			t.Errorf("the lock outlived the interrupted run: %+v", r.Lock)
		}
	}
	var done runOut
	h.json(&done, "run", "-f", cfg)
	if done.Iterations != 3 {
		t.Errorf("resumed run: %+v", done)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
