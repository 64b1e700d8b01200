package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/internal/benchstat"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
)

// The benchmarks run on the real embedded store in a temporary directory,
// so every figure includes its fsyncs. Each one reports ratios measured in
// the same run; none passes or fails on timing.

func benchStoreDir(b *testing.B) string {
	b.Helper()
	return filepath.Join(b.TempDir(), "store")
}

// benchDatasetStore creates a store whose main branch holds n prompts.
func benchDatasetStore(b *testing.B, dir string, n int) *local.Store {
	b.Helper()
	ctx := context.Background()
	st, err := local.Create(ctx, dir, "main", nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := standin.PutDataset(ctx, st, "main", "data/prompts.parquet", n); err != nil {
		b.Fatal(err)
	}
	return st
}

func benchOpenRun(b *testing.B, st artifacts.Store, opts pipeline.RunOptions) *pipeline.Run {
	b.Helper()
	r, err := pipeline.Open(context.Background(), st, opts)
	if err != nil {
		b.Fatalf("open run %s: %v", opts.Name, err)
	}
	return r
}

// noop returns a task that does nothing and declares no outputs, in
// environment env: everything a call of it costs is the engine's (cache
// lookup, admission, scratch directory, events, cache record).
func noop(env string) *pipeline.Task {
	return &pipeline.Task{Name: "noop", Version: "1", Env: env, Deterministic: true,
		Run: func(context.Context, *pipeline.TaskContext) error { return nil }}
}

// cpuTime is the CPU time this process has used (user and system).
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// noopPass adds n independent calls of t to iteration it, with params
// that make the keys distinct per (round, i), and waits for them. It
// returns the wall and CPU time per task and how many calls were cache
// hits.
func noopPass(b *testing.B, r *pipeline.Run, t *pipeline.Task, it, round, n int) (wall, cpu time.Duration, hits int) {
	b.Helper()
	ctx := context.Background()
	cpu0, start := cpuTime(b), time.Now()
	iter := r.Iteration(it)
	nodes := make([]*pipeline.Node, n)
	for i := range nodes {
		nodes[i] = iter.Go(ctx, t, pipeline.Call{Name: fmt.Sprintf("noop-%d", i), Params: map[string]int{"round": round, "i": i}})
	}
	if err := iter.Wait(ctx); err != nil {
		b.Fatal(err)
	}
	wall, cpu = time.Since(start)/time.Duration(n), (cpuTime(b)-cpu0)/time.Duration(n)
	for _, nd := range nodes {
		if nd.Cached() {
			hits++
		}
	}
	return wall, cpu, hits
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkEngineOverhead pushes 2,000 independent no-op Go tasks through
// the local executor with caching on: first with fresh keys (each task
// runs and records a cache entry), then with the same keys (each task is
// a cache hit), then with fresh keys again in an environment that asks
// for a hundredth of a core, so that a hundred times more tasks are
// admitted at once. The first two use the defaults: one core per task,
// as many at once as the machine has cores. Targets: under 0.2 ms of
// engine overhead per executed task, under 50 µs per cache hit.
func BenchmarkEngineOverhead(b *testing.B) {
	const n = 2000
	b.ReportAllocs()
	ctx := context.Background()
	st, err := local.Create(ctx, benchStoreDir(b), "main", nil)
	if err != nil {
		b.Fatal(err)
	}
	envs := map[string]pipeline.Settings{
		"default": {Cache: pipeline.Cache{Mode: pipeline.CacheAuto}},
		"wide":    {Cache: pipeline.Cache{Mode: pipeline.CacheAuto}, Resources: pipeline.Resources{CPU: 0.01}},
	}
	r := benchOpenRun(b, st, pipeline.RunOptions{Name: "overhead", Envs: envs, WorkDir: b.TempDir()})
	defer r.Close()
	round := 0
	for b.Loop() {
		round++
		run, runCPU, hits := noopPass(b, r, noop("default"), 3*round-2, round, n)
		if hits != 0 {
			b.Fatalf("first pass: %d of %d tasks were cache hits, want none", hits, n)
		}
		hit, hitCPU, hits := noopPass(b, r, noop("default"), 3*round-1, round, n)
		if hits != n {
			b.Fatalf("second pass: %d of %d tasks were cache hits, want all", hits, n)
		}
		wide, _, hits := noopPass(b, r, noop("wide"), 3*round, -round, n)
		if hits != 0 {
			b.Fatalf("wide pass: %d of %d tasks were cache hits, want none", hits, n)
		}
		b.ReportMetric(float64(time.Second)/float64(run), "run_tasks/s")
		b.ReportMetric(us(run), "run_us/task")
		b.ReportMetric(us(runCPU), "run_cpu_us/task")
		b.ReportMetric(float64(time.Second)/float64(hit), "hit_tasks/s")
		b.ReportMetric(us(hit), "hit_us/task")
		b.ReportMetric(us(hitCPU), "hit_cpu_us/task")
		b.ReportMetric(us(wide), "wide_run_us/task")
		b.ReportMetric(float64(run)/float64(wide), "run/wide_run")
	}
}

// loopFloor is the shortest wall time of the loop's DAG with the given
// staleness when one generator and one trainer each take one task at a
// time and sample and reward cost nothing: generation n starts when the
// generator is free and the policy it samples with (train n-1-staleness)
// exists; training n starts when generation n and training n-1 are done.
func loopFloor(iterations, staleness int, gen, train time.Duration) time.Duration {
	genEnd := make([]time.Duration, iterations+1)
	trainEnd := make([]time.Duration, iterations+1)
	for n := 1; n <= iterations; n++ {
		start := genEnd[n-1]
		if p := n - 1 - staleness; p >= 1 {
			start = max(start, trainEnd[p])
		}
		genEnd[n] = start + gen
		trainEnd[n] = max(genEnd[n], trainEnd[n-1]) + train
	}
	return trainEnd[iterations]
}

// loopTimes are a stand-in loop's wall time and, for its generations
// (the critical path when the loop is pipelined), the engine's share: the
// mean time an attempt took beyond the stage's sleep (fetching inputs,
// checking and uploading the output) and the mean gap between one
// generation finishing and the next starting (its cache record, the slot
// hand-over, the next one's admission).
type loopTimes struct {
	wall, genExtra, genHandoff time.Duration
}

// timeLoop runs the stand-in loop in a fresh store (so neither run borrows
// the other's cache entries).
func timeLoop(b *testing.B, iterations, staleness int, o standin.Options) loopTimes {
	b.Helper()
	ctx := context.Background()
	st := benchDatasetStore(b, benchStoreDir(b), 10)
	// One generator and one trainer, as on a real machine with one
	// inference engine and one training process; sample and reward never
	// wait for a core.
	one := pipeline.Settings{Resources: pipeline.Resources{CPU: 1}, Concurrency: 1}
	envs := map[string]pipeline.Settings{
		"sample": {Resources: pipeline.Resources{CPU: 1}}, "reward": {Resources: pipeline.Resources{CPU: 1}},
		"generate": one, "train": one,
	}
	var (
		mu                sync.Mutex
		started, finished = map[int]time.Time{}, map[int]time.Time{}
		attempts          = map[int]time.Duration{}
	)
	onEvent := func(e pipeline.Event) {
		if e.Stage != "generate" {
			return
		}
		now := time.Now() // e.Time is wall-clock time: it may step
		mu.Lock()
		defer mu.Unlock()
		switch e.Kind {
		case pipeline.EventStarted:
			started[e.Iteration] = now
		case pipeline.EventFinished:
			finished[e.Iteration], attempts[e.Iteration] = now, e.Duration
		}
	}
	r := benchOpenRun(b, st, pipeline.RunOptions{Name: fmt.Sprintf("staleness-%d", staleness), Envs: envs, Seed: 1,
		Machine: &pipeline.Machine{CPU: 4, MemoryMB: 4096}, WorkDir: b.TempDir(), OnEvent: onEvent})
	defer r.Close()
	cfg := pipeline.LoopConfig{Iterations: iterations, BatchSize: 3, MaxStaleness: staleness, Dataset: pipeline.StoreArtifact("main", "data/prompts.parquet")}
	start := time.Now()
	state, err := r.Loop(ctx, cfg, standin.Stages(o))
	if err != nil {
		b.Fatal(err)
	}
	if state.Iteration != iterations {
		b.Fatalf("loop stopped at iteration %d, want %d", state.Iteration, iterations)
	}
	t := loopTimes{wall: time.Since(start)}
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != iterations || len(started) != iterations {
		b.Fatalf("saw %d generations start and %d finish, want %d each", len(started), len(attempts), iterations)
	}
	for n := 1; n <= iterations; n++ {
		t.genExtra += (attempts[n] - o.GenerateSleep) / time.Duration(iterations)
		if n > 1 {
			t.genHandoff += started[n].Sub(finished[n-1]) / time.Duration(iterations-1)
		}
	}
	return t
}

// BenchmarkLoopOverlap runs 10 iterations of the stand-in loop with
// generation taking 2 s and training 1 s, on-policy (max_staleness 0,
// sequential) and with one step of staleness (generation of n+1 overlaps
// training of n). Targets: pipelined/ideal ≤ 1.1 and
// sequential/pipelined ≥ 1.4, where ideal is Σ max(gen, train). floor_s
// is the true minimum of this DAG with one generator (loopFloor): the
// last training cannot overlap anything, so it is 10×2 s + 1 s.
// The two gen_ metrics say how much of pipelined − floor is the engine's.
func BenchmarkLoopOverlap(b *testing.B) {
	const (
		iterations = 10
		gen        = 2 * time.Second
		train      = time.Second
	)
	o := standin.Options{GenerateSleep: gen, TrainSleep: train}
	for b.Loop() {
		seq := timeLoop(b, iterations, 0, o).wall
		p := timeLoop(b, iterations, 1, o)
		pip := p.wall
		ideal := iterations * max(gen, train)
		floor := loopFloor(iterations, 1, gen, train)
		b.ReportMetric(seq.Seconds(), "sequential_s")
		b.ReportMetric(pip.Seconds(), "pipelined_s")
		b.ReportMetric(ideal.Seconds(), "ideal_s")
		b.ReportMetric(floor.Seconds(), "floor_s")
		b.ReportMetric(pip.Seconds()/ideal.Seconds(), "pipelined/ideal")
		b.ReportMetric(pip.Seconds()/floor.Seconds(), "pipelined/floor")
		b.ReportMetric(seq.Seconds()/pip.Seconds(), "sequential/pipelined")
		b.ReportMetric(float64(p.genExtra)/float64(time.Millisecond), "gen_extra_ms")
		b.ReportMetric(float64(p.genHandoff)/float64(time.Millisecond), "gen_handoff_ms")
	}
}

// BenchmarkResume runs 49 of 50 iterations of the stand-in loop (no
// sleeps, on-policy) and stops, as a process killed between two
// iterations would. It then times what a new process does to finish:
// open the store, open the run (take the lock), load the state and run
// iteration 50 — on five byte-for-byte copies of the interrupted store,
// taking the median (resume_open_s is the part spent opening the store
// and the run). The reference is one iteration of the same run in
// its steady state: the median gap between consecutive commits over
// iterations 40–49. Resuming reads the last commit's state, not the
// history, so the ratio should stay near 1.
func BenchmarkResume(b *testing.B) {
	const (
		iterations = 50
		resumes    = 5
	)
	ctx := context.Background()
	envs := map[string]pipeline.Settings{"sample": {}, "generate": {}, "reward": {}, "train": {}}
	stages := standin.Stages(standin.Options{})
	for b.Loop() {
		dir := benchStoreDir(b)
		st := benchDatasetStore(b, dir, 10)
		opts := pipeline.RunOptions{Name: "resume", Envs: envs, Seed: 1, Machine: &pipeline.Machine{CPU: 4, MemoryMB: 4096}, WorkDir: b.TempDir()}
		cfg := pipeline.LoopConfig{Iterations: iterations, BatchSize: 3, Dataset: pipeline.StoreArtifact("main", "data/prompts.parquet")}
		commits := make([]time.Time, 0, iterations)
		first := cfg
		first.Stop = func(n int) bool {
			commits = append(commits, time.Now())
			return n == iterations-1
		}
		r := benchOpenRun(b, st, opts)
		state, err := r.Loop(ctx, first, stages)
		if err != nil || state.Iteration != iterations-1 {
			b.Fatalf("first leg: state %+v, err %v; want iteration %d", state, err, iterations-1)
		}
		if err := r.Close(); err != nil {
			b.Fatal(err)
		}
		var gaps []time.Duration
		for i := len(commits) - 10; i < len(commits); i++ {
			gaps = append(gaps, commits[i].Sub(commits[i-1]))
		}

		var times, opens []time.Duration
		for k := range resumes {
			copyDir := filepath.Join(b.TempDir(), "store-"+strconv.Itoa(k))
			if err := os.CopyFS(copyDir, os.DirFS(dir)); err != nil {
				b.Fatal(err)
			}
			// The copy's bytes go to disk now, not in the first fsync
			// of the timed resume.
			syscall.Sync()
			start := time.Now()
			st, err := local.Open(ctx, copyDir, nil)
			if err != nil {
				b.Fatal(err)
			}
			r := benchOpenRun(b, st, opts)
			opens = append(opens, time.Since(start))
			state, err := r.Loop(ctx, cfg, stages)
			times = append(times, time.Since(start))
			if err != nil || state.Iteration != iterations {
				b.Fatalf("resume %d: state %+v, err %v; want iteration %d", k, state, err, iterations)
			}
			if err := r.Close(); err != nil {
				b.Fatal(err)
			}
		}
		resume, iteration := benchstat.Median(times), benchstat.Median(gaps)
		b.ReportMetric(resume.Seconds(), "resume_s")
		b.ReportMetric(benchstat.Median(opens).Seconds(), "resume_open_s")
		b.ReportMetric(iteration.Seconds(), "iteration_s")
		b.ReportMetric(resume.Seconds()/iteration.Seconds(), "resume/iteration")
	}
}
