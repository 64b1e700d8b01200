package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

func openRun(t *testing.T, st artifacts.Store, opts pipeline.RunOptions) *pipeline.Run {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "test"
	}
	if opts.Machine == nil {
		opts.Machine = &pipeline.Machine{CPU: 4, MemoryMB: 1024}
	}
	r, err := pipeline.Open(context.Background(), st, opts)
	if err != nil {
		t.Fatalf("open run: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func readAll(t *testing.T, st artifacts.Store, ref, path string) string {
	t.Helper()
	return string(standintest.Read(t, st, ref, path))
}

// write is a task that writes its "text" param (plus its input, if any)
// to its output, counting its runs.
func writeTask(name string, runs *atomic.Int32) *pipeline.Task {
	return &pipeline.Task{
		Name: name, Version: "1", Deterministic: true,
		Outputs: []pipeline.Output{{Name: "out", File: name + ".txt"}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			runs.Add(1)
			var p struct{ Text string }
			if err := tc.Params(&p); err != nil {
				return err
			}
			in := ""
			if path := tc.InputPath("in"); path != "" {
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				in = string(b) + "+"
			}
			return os.WriteFile(tc.OutputPath("out"), []byte(in+p.Text), 0o644)
		},
	}
}

func TestDAGCacheAndInvalidation(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	var ra, rb, rc atomic.Int32
	a, b, c := writeTask("a", &ra), writeTask("b", &rb), writeTask("c", &rc)
	build := func(r *pipeline.Run, n int, textA string) (*pipeline.Node, *pipeline.Node, *pipeline.Node) {
		it := r.Iteration(n)
		na := it.Go(ctx, a, pipeline.Call{Params: map[string]string{"text": textA}})
		nb := it.Go(ctx, b, pipeline.Call{Params: map[string]string{"text": "B"}, Inputs: map[string]pipeline.Artifact{"in": na.Output("out")}})
		nc := it.Go(ctx, c, pipeline.Call{Params: map[string]string{"text": "C"}}) // independent of a
		if _, err := it.Commit(ctx, map[string]int{"iteration": n}, nil); err != nil {
			t.Fatalf("commit %d: %v", n, err)
		}
		return na, nb, nc
	}
	r := openRun(t, st, pipeline.RunOptions{})
	build(r, 1, "A")
	if got := readAll(t, st, r.Branch(), "iterations/000001/b.txt"); got != "A+B" {
		t.Fatalf("b.txt = %q, want A+B", got)
	}
	// Same inputs in the next iteration: every task is a cache hit.
	na, nb, nc := build(r, 2, "A")
	if !na.Cached() || !nb.Cached() || !nc.Cached() || ra.Load() != 1 || rb.Load() != 1 || rc.Load() != 1 {
		t.Fatalf("second iteration: cached a=%v b=%v c=%v, runs %d %d %d; want all cached, one run each", na.Cached(), nb.Cached(), nc.Cached(), ra.Load(), rb.Load(), rc.Load())
	}
	if got := readAll(t, st, r.Branch(), "iterations/000002/b.txt"); got != "A+B" {
		t.Fatalf("cached b.txt = %q, want A+B", got)
	}
	// Change a's params: a and b (downstream) rerun, c does not.
	na, nb, nc = build(r, 3, "A2")
	if na.Cached() || nb.Cached() || !nc.Cached() || rc.Load() != 1 {
		t.Fatalf("after changing a: cached a=%v b=%v c=%v; want a, b rerun and c cached", na.Cached(), nb.Cached(), nc.Cached())
	}
	if got := readAll(t, st, r.Branch(), "iterations/000003/b.txt"); got != "A2+B" {
		t.Fatalf("b.txt = %q, want A2+B", got)
	}
	// Commit metadata names the iteration and the cache keys.
	head, err := st.ResolveRef(ctx, r.Branch())
	if err != nil {
		t.Fatal(err)
	}
	if head.Metadata["rlpipe.iteration"] != "3" || !strings.Contains(head.Metadata["rlpipe.cache-keys"], nb.Key()) {
		t.Fatalf("commit metadata = %v", head.Metadata)
	}
	// A second run reuses the first run's results (the cache is repository-wide).
	r.Close()
	r2 := openRun(t, st, pipeline.RunOptions{Name: "other"})
	na, _, _ = build(r2, 1, "A")
	if !na.Cached() || ra.Load() != 2 {
		t.Fatalf("other run: a cached=%v runs=%d; want a cache hit", na.Cached(), ra.Load())
	}
	// A task that reads its seed is keyed by it: another seed reruns it.
	seeded := writeTask("s", new(atomic.Int32))
	seeded.Deterministic = false
	r2.Close()
	runSeeded := func(name string, seed uint64) bool {
		r := openRun(t, st, pipeline.RunOptions{Name: name, Seed: seed})
		defer r.Close()
		n := r.Iteration(1).Go(ctx, seeded, pipeline.Call{Params: map[string]string{"text": "S"}})
		if err := n.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		return n.Cached()
	}
	if runSeeded("seed1", 1) || !runSeeded("seed1b", 1) || runSeeded("seed2", 2) {
		t.Fatal("seeded task: want a miss, a hit with the same seed, a miss with another seed")
	}
	// --no-cache runs everything.
	r3 := openRun(t, st, pipeline.RunOptions{Name: "fresh", NoCache: true})
	na, _, _ = build(r3, 1, "A")
	if na.Cached() || ra.Load() != 3 {
		t.Fatalf("no-cache run: a cached=%v runs=%d; want it to run", na.Cached(), ra.Load())
	}
}

func TestRetriesBackoffAndPermanent(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	var events []pipeline.Event
	r := openRun(t, st, pipeline.RunOptions{
		Envs:    map[string]pipeline.Settings{"cpu": {Retry: pipeline.Retry{Attempts: 5, Backoff: 10 * time.Millisecond, Factor: 2}}},
		OnEvent: func(e pipeline.Event) { events = append(events, e) },
	})
	var calls atomic.Int32
	var attempts []int
	flaky := &pipeline.Task{Name: "flaky", Env: "cpu", Outputs: []pipeline.Output{{Name: "out"}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			attempts = append(attempts, tc.Attempt)
			if calls.Add(1) <= 2 {
				return errors.New("transient failure")
			}
			return os.WriteFile(tc.OutputPath("out"), []byte("ok"), 0o644)
		}}
	it := r.Iteration(1)
	n := it.Go(ctx, flaky, pipeline.Call{})
	if err := n.Wait(ctx); err != nil {
		t.Fatalf("flaky task: %v", err)
	}
	if fmt.Sprint(attempts) != "[1 2 3]" {
		t.Fatalf("attempts seen by the task = %v, want [1 2 3]", attempts)
	}
	retried := 0
	for _, e := range events {
		if e.Kind == pipeline.EventRetried {
			retried++
		}
	}
	if retried != 2 {
		t.Fatalf("retried events = %d, want 2", retried)
	}
	var permCalls atomic.Int32
	perm := &pipeline.Task{Name: "perm", Env: "cpu", Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
		permCalls.Add(1)
		return pipeline.Permanent(errors.New("bad input row 7"))
	}}
	err := it.Go(ctx, perm, pipeline.Call{}).Wait(ctx)
	var te *pipeline.TaskError
	if !errors.As(err, &te) || te.Attempts != 1 || permCalls.Load() != 1 || !strings.Contains(err.Error(), "bad input row 7") {
		t.Fatalf("permanent error: %v (calls %d); want one attempt", err, permCalls.Load())
	}
}

func TestRetryWait(t *testing.T) {
	r := pipeline.Retry{Backoff: 100 * time.Millisecond, Factor: 3, MaxBackoff: time.Second}
	got := []time.Duration{r.Wait(1), r.Wait(2), r.Wait(3), r.Wait(10)}
	want := []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 900 * time.Millisecond, time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("waits = %v, want %v", got, want)
	}
}

func TestTimeoutKillsProcessTree(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	r := openRun(t, st, pipeline.RunOptions{Envs: map[string]pipeline.Settings{
		"slow": {Timeout: 300 * time.Millisecond, Retry: pipeline.Retry{Attempts: 2, Backoff: time.Millisecond}},
	}})
	// The command starts a grandchild that would outlive a plain kill.
	task := &pipeline.Task{Name: "sleepy", Env: "slow", Command: []string{"sh", "-c", "sleep 30 & echo $! > " + pidFile + "; wait"}}
	err := r.Iteration(1).Go(ctx, task, pipeline.Call{}).Wait(ctx)
	var te *pipeline.TaskError
	if !errors.As(err, &te) || te.Attempts != 2 || !errors.Is(err, pipeline.ErrTimeout) {
		t.Fatalf("slow command: %v; want ErrTimeout after 2 attempts", err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(string(b), &pid)
	// The grandchild is gone (killed with its process group); allow the
	// kernel a moment to reap it.
	gone := false
	for i := 0; i < 100 && !gone; i++ {
		if err := syscallKill(pid); err != nil {
			gone = true
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if !gone {
		t.Fatalf("grandchild %d survived the timeout", pid)
	}
}

func TestDeadlineEndsRetries(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	r := openRun(t, st, pipeline.RunOptions{Envs: map[string]pipeline.Settings{
		"e": {Deadline: 200 * time.Millisecond, Retry: pipeline.Retry{Attempts: 1000, Backoff: 50 * time.Millisecond, Factor: 1}},
	}})
	var calls atomic.Int32
	task := &pipeline.Task{Name: "fails", Env: "e", Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
		calls.Add(1)
		return errors.New("nope")
	}}
	err := r.Iteration(1).Go(ctx, task, pipeline.Call{}).Wait(ctx)
	if !errors.Is(err, pipeline.ErrDeadline) || calls.Load() >= 1000 {
		t.Fatalf("deadline: %v after %d calls; want ErrDeadline well before 1000 attempts", err, calls.Load())
	}
}

func TestMissingAndInvalidOutputs(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	r := openRun(t, st, pipeline.RunOptions{})
	missing := &pipeline.Task{Name: "lazy", Outputs: []pipeline.Output{{Name: "table", File: "t.parquet"}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error { return nil }}
	err := r.Iteration(1).Go(ctx, missing, pipeline.Call{}).Wait(ctx)
	if !errors.Is(err, pipeline.ErrOutput) || !strings.Contains(err.Error(), `output "table"`) {
		t.Fatalf("missing output: %v", err)
	}
	bad := &pipeline.Task{Name: "bad", Outputs: []pipeline.Output{{Name: "table", File: "t.parquet", Check: func(string) error {
		return errors.New("column total: want double, found string")
	}}}, Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
		return os.WriteFile(tc.OutputPath("table"), []byte("x"), 0o644)
	}}
	err = r.Iteration(1).Go(ctx, bad, pipeline.Call{}).Wait(ctx)
	if !errors.Is(err, pipeline.ErrOutput) || !strings.Contains(err.Error(), "column total") {
		t.Fatalf("invalid output: %v", err)
	}
}

func TestUnschedulableFailsAtOnce(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	r := openRun(t, st, pipeline.RunOptions{Envs: map[string]pipeline.Settings{"gpu": {Resources: pipeline.Resources{GPU: 8, GPUType: "H100"}}}})
	task := &pipeline.Task{Name: "train", Env: "gpu", Run: func(context.Context, *pipeline.TaskContext) error { return nil }}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := r.Iteration(1).Go(ctx, task, pipeline.Call{}).Wait(ctx)
	if !errors.Is(err, pipeline.ErrUnschedulable) || !strings.Contains(err.Error(), "8 GPU") {
		t.Fatalf("unschedulable: %v", err)
	}
}

func TestConcurrencyLimit(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	r := openRun(t, st, pipeline.RunOptions{Envs: map[string]pipeline.Settings{"one": {Concurrency: 1, Cache: pipeline.Cache{Mode: pipeline.CacheDisable}}}})
	var running, peak atomic.Int32
	task := &pipeline.Task{Name: "t", Env: "one", Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
		v := running.Add(1)
		for {
			p := peak.Load()
			if v <= p || peak.CompareAndSwap(p, v) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		running.Add(-1)
		return nil
	}}
	it := r.Iteration(1)
	for i := 0; i < 5; i++ {
		it.Go(ctx, task, pipeline.Call{Name: fmt.Sprintf("t%d", i)})
	}
	if err := it.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if peak.Load() != 1 {
		t.Fatalf("peak concurrency = %d, want 1", peak.Load())
	}
}

func TestSecondRunIsRefused(t *testing.T) {
	st := standintest.NewStore(t, 0)
	openRun(t, st, pipeline.RunOptions{Name: "exp"})
	_, err := pipeline.Open(context.Background(), st, pipeline.RunOptions{Name: "exp"})
	host, _ := os.Hostname()
	if !errors.Is(err, pipeline.ErrRunLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d on %s", os.Getpid(), host)) {
		t.Fatalf("second open: %v; want ErrRunLocked naming this process", err)
	}
}

func TestMemoReplaysOnRetry(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	r := openRun(t, st, pipeline.RunOptions{Envs: map[string]pipeline.Settings{"e": {Retry: pipeline.Retry{Attempts: 3, Backoff: time.Millisecond}}}})
	var judged atomic.Int32
	task := &pipeline.Task{Name: "judge", Env: "e", Outputs: []pipeline.Output{{Name: "out"}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			var score float64
			if err := tc.Memo(ctx, map[string]string{"prompt": "2+2", "answer": "4"}, &score, func(ctx context.Context) (any, error) {
				judged.Add(1)
				return 0.75, nil
			}); err != nil {
				return err
			}
			if tc.Attempt == 1 {
				return errors.New("crash after the paid call")
			}
			return os.WriteFile(tc.OutputPath("out"), []byte(fmt.Sprint(score)), 0o644)
		}}
	if err := r.Iteration(1).Go(ctx, task, pipeline.Call{}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if judged.Load() != 1 || readAll(t, st, r.Branch(), "iterations/000001/out") != "0.75" {
		t.Fatalf("judge called %d times; want 1 with the replayed score", judged.Load())
	}
}

// TestWorkDirIsMadeOnlyWhenAsked: a Go task with no inputs and no outputs
// makes no work directory unless it calls WorkDir; one that does gets a
// private, writable directory that is gone once the attempt ends, and a
// later call fails rather than hand out a removed path.
func TestWorkDirIsMadeOnlyWhenAsked(t *testing.T) {
	ctx := context.Background()
	workDir := t.TempDir()
	r := openRun(t, standintest.NewStore(t, 0), pipeline.RunOptions{WorkDir: workDir})
	entries := func() int {
		t.Helper()
		es, err := os.ReadDir(workDir)
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	var during int
	quiet := &pipeline.Task{Name: "quiet", Version: "1", Deterministic: true,
		Run: func(context.Context, *pipeline.TaskContext) error { during = entries(); return nil }}
	var asked string
	var late *pipeline.TaskContext
	asks := &pipeline.Task{Name: "asks", Version: "1", Deterministic: true,
		Run: func(_ context.Context, tc *pipeline.TaskContext) error {
			dir, err := tc.WorkDir()
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, "scratch.txt"), []byte("x"), 0o644); err != nil {
				return err
			}
			again, err := tc.WorkDir()
			if err != nil || again != dir {
				return fmt.Errorf("second WorkDir call: %q, %v; want %q", again, err, dir)
			}
			asked, late = dir, tc
			return nil
		}}
	it := r.Iteration(1)
	it.Go(ctx, quiet, pipeline.Call{})
	if err := it.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if during != 0 {
		t.Fatalf("a task that never asked for a work directory saw %d entries in the work folder, want 0", during)
	}
	it = r.Iteration(2)
	it.Go(ctx, asks, pipeline.Call{})
	if err := it.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(asked), "rlpipe-task-") || filepath.Dir(asked) != workDir {
		t.Fatalf("work directory %q, want rlpipe-task-… in %s", asked, workDir)
	}
	if _, err := os.Stat(asked); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("work directory after the attempt: %v, want it removed", err)
	}
	if dir, err := late.WorkDir(); err == nil {
		t.Fatalf("WorkDir after the attempt = %q, want an error", dir)
	}
}

// The engine records the run's config, whoever drives it: a library user
// with pipeline.Open and Commit gets run/config.yaml with the first
// iteration it commits, nothing before, and no new version of it while
// the config is unchanged.
func TestEngineRecordsTheConfig(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	cfg := []byte("# effective config\niterations: 2\n")
	r := openRun(t, st, pipeline.RunOptions{Name: "lib", Config: cfg})
	var n atomic.Int32
	it := r.Iteration(1)
	it.Go(ctx, writeTask("gen", &n), pipeline.Call{Params: map[string]string{"text": "a"}})
	if _, _, err := st.GetObject(ctx, runs.Branch("lib"), runs.ConfigPath); !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("the config is staged before any commit: %v", err)
	}
	c1, err := it.Commit(ctx, map[string]int{"iteration": 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, st, c1.ID, runs.ConfigPath); got != string(cfg) {
		t.Fatalf("%s at iteration 1: %q", runs.ConfigPath, got)
	}
	it = r.Iteration(2)
	it.Go(ctx, writeTask("gen", &n), pipeline.Call{Params: map[string]string{"text": "b"}})
	c2, err := it.Commit(ctx, map[string]int{"iteration": 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for ch, err := range st.Diff(ctx, c1.ID, c2.ID, &artifacts.DiffOptions{TwoDot: true}) {
		if err != nil {
			t.Fatal(err)
		}
		if ch.Path == runs.ConfigPath {
			t.Errorf("iteration 2 rewrote the unchanged config: %+v", ch)
		}
	}
}

// elsewhere is an executor standing for one on other machines: it
// counts the calls it is handed and runs none of them.
type elsewhere struct{ calls atomic.Int32 }

func (x *elsewhere) Execute(_ context.Context, _ *pipeline.Task, job pipeline.Job, _ func(pipeline.Event)) (pipeline.Outcome, error) {
	x.calls.Add(1)
	return pipeline.Outcome{}, pipeline.Permanent(fmt.Errorf("%s was sent away", job.Call))
}

// TestBookkeepingRunsInTheRunsProcess: a task marked Bookkeeping runs in
// the run's process, with the local executor's retries and outputs,
// whatever executor the run has, its resources cut to this machine's
// without GPUs; the executor gets every other task.
func TestBookkeepingRunsInTheRunsProcess(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	x := &elsewhere{}
	// Sized for the workers' hosts: more cores than this machine, a GPU.
	r := openRun(t, st, pipeline.RunOptions{Executor: x, Envs: map[string]pipeline.Settings{
		"advantages": {Retry: pipeline.Retry{Attempts: 2}, Resources: pipeline.Resources{CPU: 16, GPU: 1}}}})
	var runs atomic.Int32
	book := writeTask("advantages", &runs)
	book.Env, book.Bookkeeping = "advantages", true
	first := true
	run := book.Run
	book.Run = func(ctx context.Context, tc *pipeline.TaskContext) error {
		if first { // the environment's retries apply
			first = false
			return errors.New("flaky")
		}
		return run(ctx, tc)
	}
	it := r.Iteration(1)
	nd := it.Go(ctx, book, pipeline.Call{Params: map[string]string{"text": "here"}})
	if err := nd.Wait(ctx); err != nil {
		t.Fatalf("bookkeeping task: %v", err)
	}
	if got := runs.Load(); got != 1 || x.calls.Load() != 0 {
		t.Fatalf("bookkeeping task ran %d times here and was sent away %d times; want 1 and 0", got, x.calls.Load())
	}
	var other atomic.Int32
	err := it.Go(ctx, writeTask("train", &other), pipeline.Call{Params: map[string]string{"text": "x"}}).Wait(ctx)
	if err == nil || !strings.Contains(err.Error(), "train was sent away") || x.calls.Load() != 1 || other.Load() != 0 {
		t.Fatalf("other task: %v, %d calls to the executor, %d runs here; want it sent away once", err, x.calls.Load(), other.Load())
	}
}
