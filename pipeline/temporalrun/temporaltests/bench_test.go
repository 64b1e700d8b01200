package temporaltests_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/common/dynamicconfig"
	temporalserver "go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/internal/benchstat"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/pipeline/temporalrun"
)

// noop is a task that does nothing and writes nothing: what remains of
// its time is the executor's.
var noop = &pipeline.Task{Name: "noop", Env: "x", Run: func(context.Context, *pipeline.TaskContext) error { return nil }}

func benchStore(b *testing.B) artifacts.Store {
	b.Helper()
	st, err := local.Create(context.Background(), filepath.Join(b.TempDir(), "store"), "main", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// runNoops runs n no-op calls (distinct cache keys, cache off) with at
// most par in flight and returns the wall time.
func runNoops(b *testing.B, st artifacts.Store, name string, x pipeline.Executor, envs map[string]pipeline.Settings, n, par int) time.Duration {
	b.Helper()
	ctx := context.Background()
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: name, Envs: envs, Executor: x, NoCache: true,
		Machine: &pipeline.Machine{CPU: 64, MemoryMB: 1 << 16}})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	it := r.Iteration(1)
	start := time.Now()
	sem := make(chan struct{}, par)
	nodes := make([]*pipeline.Node, n)
	for i := range nodes {
		sem <- struct{}{}
		nodes[i] = it.Go(ctx, noop, pipeline.Call{Name: fmt.Sprintf("noop-%04d", i), Params: i})
		go func(nd *pipeline.Node) { _ = nd.Wait(ctx); <-sem }(nodes[i])
	}
	for _, nd := range nodes {
		if err := nd.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// benchRig makes a bench store served by k workers (startBenchWorkers)
// and the Temporal executor that sends them its calls.
func benchRig(b *testing.B, c client.Client, envs map[string]pipeline.Settings, k int) (artifacts.Store, *temporalrun.Executor) {
	b.Helper()
	st := benchStore(b)
	startBenchWorkers(b, c, st, envs, k)
	x, err := temporalrun.NewExecutor(temporalrun.ExecutorOptions{Client: c, Repository: repo, Pipeline: pipe, Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	return st, x
}

// startBenchWorkers starts k in-process workers on env x's queue, each
// running one attempt at a time, as k single-slot hosts would.
func startBenchWorkers(b *testing.B, c client.Client, st artifacts.Store, envs map[string]pipeline.Settings, k int) {
	b.Helper()
	for i := 0; i < k; i++ {
		b.Cleanup(startWorkers(b, st, pipeline.WorkerOptions{Tasks: []*pipeline.Task{noop}, Envs: envs},
			temporalrun.WorkerOptions{Client: c, Repository: repo, Pipeline: pipe, Envs: []string{"x"},
				Concurrency: map[string]int{"x": 1}, Name: fmt.Sprintf("bench-%d", i)}))
	}
}

// BenchmarkTemporalTaskOverhead compares the time per task call, one call
// at a time, through the Temporal executor (a task workflow and one
// attempt activity on an in-process server) with the local executor's on
// the same store and machine; both include the engine's own work (cache
// key, cache record, work directory).
func BenchmarkTemporalTaskOverhead(b *testing.B) {
	const n = 60
	envs := map[string]pipeline.Settings{"x": {}}
	ts := temporaltest.NewServer(devConfig())
	defer ts.Stop()
	c := ts.GetDefaultClient()
	for i := 0; i < b.N; i++ {
		st, x := benchRig(b, c, envs, 1)
		runNoops(b, st, fmt.Sprintf("warm%d", i), x, envs, 5, 1) // first workflow of a queue pays setup
		localT := runNoops(b, st, fmt.Sprintf("local%d", i), nil, envs, n, 1)
		tempT := runNoops(b, st, fmt.Sprintf("temporal%d", i), x, envs, n, 1)
		floorT := temporalFloor(b, c, n)
		perLocal := float64(localT.Microseconds()) / 1000 / n
		perTemp := float64(tempT.Microseconds()) / 1000 / n
		perFloor := float64(floorT.Microseconds()) / 1000 / n
		b.ReportMetric(perLocal, "local-ms/task")
		b.ReportMetric(perTemp, "temporal-ms/task")
		b.ReportMetric(perFloor, "floor-ms/task")
		b.ReportMetric(perTemp/perLocal, "temporal/local")
		b.ReportMetric(perTemp/perFloor, "temporal/floor")
		fmt.Printf("task overhead, %d sequential no-op calls: local %.2f ms/task, Temporal %.2f ms/task (in-process server, 1 worker): %.1fx local; "+
			"a bare workflow with one empty activity on the same server %.2f ms: rlpipe on Temporal is %.2fx that floor\n",
			n, perLocal, perTemp, perTemp/perLocal, perFloor, perTemp/perFloor)
	}
}

// temporalFloor times n sequential runs of the least a Temporal task can
// be: a workflow that runs one empty activity, on a worker of its own.
func temporalFloor(b *testing.B, c client.Client, n int) time.Duration {
	b.Helper()
	w := worker.New(c, "floor", worker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		return workflow.ExecuteActivity(ctx, "floor-activity").Get(ctx, nil)
	}, workflow.RegisterOptions{Name: "floor"})
	w.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: "floor-activity"})
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	ctx := context.Background()
	run := func(i int) {
		r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("floor-%d-%d", b.N, i), TaskQueue: "floor"}, "floor")
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Get(ctx, nil); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ {
		run(-1 - i)
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		run(i)
	}
	return time.Since(start)
}

// BenchmarkTemporalNoopThroughput4Workers runs 200 no-op calls, 16 in
// flight, through 4 workers that each run one attempt at a time, and
// compares the throughput with the local executor running 4 at a time.
func BenchmarkTemporalNoopThroughput4Workers(b *testing.B) {
	const n, inflight = 200, 16
	envs := map[string]pipeline.Settings{"x": {Concurrency: 4}}
	ts := temporaltest.NewServer(devConfig())
	defer ts.Stop()
	c := ts.GetDefaultClient()
	for i := 0; i < b.N; i++ {
		st, x := benchRig(b, c, envs, 4)
		runNoops(b, st, fmt.Sprintf("warm%d", i), x, envs, 8, 4)
		localT := runNoops(b, st, fmt.Sprintf("local%d", i), nil, envs, n, inflight)
		tempT := runNoops(b, st, fmt.Sprintf("temporal%d", i), x, envs, n, inflight)
		localRate := n / localT.Seconds()
		tempRate := n / tempT.Seconds()
		b.ReportMetric(tempRate, "temporal-tasks/s")
		b.ReportMetric(localRate, "local-tasks/s")
		b.ReportMetric(localRate/tempRate, "local/temporal")
		fmt.Printf("no-op throughput, %d calls, %d in flight: Temporal with 4 workers %.0f tasks/s, local executor (4 at once) %.0f tasks/s: local/Temporal %.1fx\n",
			n, inflight, tempRate, localRate, localRate/tempRate)
	}
}

// BenchmarkTemporalDemo runs the arithmetic demo (examples/arithmetic,
// the full dataset) with the local executor and through Temporal as
// README's "Many machines" sets it up — an in-process server configured
// as `rlpipe temporal dev`, the store served by `rlpipe store serve`, one
// warm worker process for generate,train,eval, the driver keeping the
// books — and reports the Temporal run's wall time over the local run's.
// Every artifact of each run, the held-out evaluations among them, must
// be the same in both. The two alternate over rounds
// (RLPIPE_BENCH_DEMO_ROUNDS, default 3), which goes first changing each
// round, and the figures are the medians: one run of each moves by a
// tenth from one minute to the next on a 2-core machine.
// RLPIPE_BENCH_DEMO_ITERATIONS cuts the run (default the demo's 60;
// evaluations stay every 10th iteration, or at the last one of a shorter
// run).
func BenchmarkTemporalDemo(b *testing.B) {
	iters := envInt(b, "RLPIPE_BENCH_DEMO_ITERATIONS", 60)
	rounds := envInt(b, "RLPIPE_BENCH_DEMO_ROUNDS", 3)
	edits := map[string]string{"iterations: 60": fmt.Sprintf("iterations: %d", iters)}
	if iters < 10 {
		edits["every: 10"] = fmt.Sprintf("every: %d", iters)
	}
	cfg, setup := arithmeticConfig(b, edits)
	local := func() (time.Duration, map[string]string) {
		dir := b.TempDir()
		store := filepath.Join(dir, "store")
		setup(dir, store)
		start := time.Now()
		rlpipe(b, dir, nil, "--store", store, "run", "-f", cfg, "--no-report")
		took := time.Since(start)
		st, err := local.Open(context.Background(), store, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		return took, standintest.Sums(b, st, "runs-arith")
	}
	temporal := func() (time.Duration, map[string]string) {
		c := newCluster(b, setup)
		w := c.worker("worker", cfg, "--env", "generate,train,eval")
		start := time.Now()
		rlpipe(b, c.dir, c.env, c.runArgs(cfg, "--no-report")...)
		took := time.Since(start)
		// Stopped as Ctrl-C stops it, so that RLPIPE_CPUPROFILE's profile
		// of the worker is written.
		_ = w.cmd.Process.Signal(os.Interrupt)
		<-w.exited
		got, _ := c.storeSums("arith")
		return took, got
	}
	for i := 0; i < b.N; i++ {
		var localS, tempS, ratios []float64
		for r := range rounds {
			var lt, tt time.Duration
			var want, got map[string]string
			if r%2 == 0 {
				lt, want = local()
				tt, got = temporal()
			} else {
				tt, got = temporal()
				lt, want = local()
			}
			sameSums(b, want, got)
			localS, tempS = append(localS, lt.Seconds()), append(tempS, tt.Seconds())
			ratios = append(ratios, tt.Seconds()/lt.Seconds())
		}
		load, _ := os.ReadFile("/proc/loadavg")
		ml, mt, mr := benchstat.Median(localS), benchstat.Median(tempS), benchstat.Median(ratios)
		b.ReportMetric(ml, "local-s")
		b.ReportMetric(mt, "temporal-s")
		b.ReportMetric(mr, "temporal/local")
		fmt.Printf("arithmetic demo, %d iterations, %d rounds: local executor %.1f s, Temporal (in-process server configured as `rlpipe temporal dev`, one worker process serving every environment, as README shows) %.1f s (medians): %.2fx local (median of the rounds' %s); artifacts identical; load average %s\n",
			iters, rounds, ml, mt, mr, ratioList(ratios), strings.Join(strings.Fields(string(load))[:3], " "))
	}
}

// envInt reads a positive whole number from the environment variable
// name, or returns def when it is unset.
func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive whole number", name, v)
	}
	return n
}

func ratioList(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, ", ")
}

// BenchmarkTemporalDevConfig compares the time per no-op task call, one
// at a time, through one worker that runs up to 4 attempts at once (a
// worker hands attempts over eagerly only with a slot its pollers do not
// hold), on three test servers: Temporal's defaults; eager activity
// execution on; and `rlpipe temporal dev`'s config (devserver.DynamicConfig:
// eager attempts, and the one history shard's queue readers not held to
// 20 polls a second).
func BenchmarkTemporalDevConfig(b *testing.B) {
	const n = 60
	envs := map[string]pipeline.Settings{"x": {Concurrency: 4}}
	servers := []struct {
		name string
		ts   *temporaltest.TestServer
	}{
		{"defaults", temporaltest.NewServer()},
		{"eager", temporaltest.NewServer(temporaltest.WithBaseServerOptions(temporalserver.WithDynamicConfigClient(dynamicconfig.StaticClient{
			dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): []dynamicconfig.ConstrainedValue{{Value: true}},
			dynamicconfig.EnableActivityEagerExecution.Key():            []dynamicconfig.ConstrainedValue{{Value: true}},
		})))},
		{"dev", temporaltest.NewServer(devConfig())},
	}
	for _, s := range servers {
		defer s.ts.Stop()
	}
	per := func(c client.Client, name string) float64 {
		st := benchStore(b)
		b.Cleanup(startWorkers(b, st, pipeline.WorkerOptions{Tasks: []*pipeline.Task{noop}, Envs: envs},
			temporalrun.WorkerOptions{Client: c, Repository: repo, Pipeline: pipe, Envs: []string{"x"}, Concurrency: map[string]int{"x": 4}, Name: name}))
		x, err := temporalrun.NewExecutor(temporalrun.ExecutorOptions{Client: c, Repository: repo, Pipeline: pipe, Logger: zerolog.Nop()})
		if err != nil {
			b.Fatal(err)
		}
		runNoops(b, st, name+"-warm", x, envs, 5, 1)
		return float64(runNoops(b, st, name, x, envs, n, 1).Microseconds()) / 1000 / n
	}
	for i := 0; i < b.N; i++ {
		ms := map[string]float64{}
		for _, s := range servers {
			ms[s.name] = per(s.ts.GetDefaultClient(), fmt.Sprintf("%s%d", s.name, i))
			b.ReportMetric(ms[s.name], s.name+"-ms/task")
		}
		b.ReportMetric(ms["dev"]/ms["defaults"], "dev/defaults")
		fmt.Printf("task overhead, %d sequential no-op calls, a worker of 4 slots: Temporal's defaults %.2f ms/task, eager activity execution on %.2f ms/task, rlpipe temporal dev's config %.2f ms/task: dev/defaults %.3f\n",
			n, ms["defaults"], ms["eager"], ms["dev"], ms["dev"]/ms["defaults"])
	}
}

// BenchmarkTemporalScaleWorkers runs `rlpipe worker --scale sample=0:4`
// through a run-shaped load: three rounds of 16 sample calls (500 ms
// each, one attempt per process) sent at once, each followed by 3 s with
// nothing in flight (a trainer's update). It prints the trace of worker
// processes against calls in flight, sampled every 250 ms, and reports
// the peak and the time-weighted mean of each.
func BenchmarkTemporalScaleWorkers(b *testing.B) {
	r := newScaleRig(b, "sample=0:4")
	for i := 0; i < b.N; i++ {
		type point struct {
			at              time.Duration
			inflight, procs int
		}
		var trace []point
		stop := make(chan struct{})
		sampled := make(chan struct{})
		start := time.Now()
		go func() {
			defer close(sampled)
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			for {
				procs := 0
				if rows := r.trace(); len(rows) > 0 {
					procs = rows[len(rows)-1].Processes
				}
				trace = append(trace, point{time.Since(start), int(r.inflight.Load()), procs})
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
		for range 3 {
			r.submit(16)
			r.wait()
			time.Sleep(3 * time.Second)
		}
		close(stop)
		<-sampled
		var lines []string
		peakP, peakF := 0, 0
		var wP, wF float64
		for j, p := range trace {
			peakP, peakF = max(peakP, p.procs), max(peakF, p.inflight)
			if j > 0 {
				dt := (p.at - trace[j-1].at).Seconds()
				wP += float64(trace[j-1].procs) * dt
				wF += float64(trace[j-1].inflight) * dt
			}
			if j == 0 || j == len(trace)-1 || p.procs != trace[j-1].procs || p.inflight != trace[j-1].inflight {
				lines = append(lines, fmt.Sprintf("%6.2fs  in flight %2d  processes %d", p.at.Seconds(), p.inflight, p.procs))
			}
		}
		total := trace[len(trace)-1].at.Seconds()
		// Printed, not only logged: the testing package cuts a benchmark's
		// log short.
		fmt.Printf("worker processes of environment sample (--scale sample=0:4, idle 1s) against calls in flight:\n%s\n", strings.Join(lines, "\n"))
		b.Logf("%d trace points; the trace is printed above", len(lines))
		b.ReportMetric(float64(peakP), "max-processes")
		b.ReportMetric(wP/total, "mean-processes")
		b.ReportMetric(float64(peakF), "max-in-flight")
		b.ReportMetric(wF/total, "mean-in-flight")
		fmt.Printf("worker scaling over %.1fs, 3 rounds of 16 calls of 500 ms: processes peak %d, time-weighted mean %.2f (limits 0:4); calls in flight peak %d, mean %.2f\n",
			total, peakP, wP/total, peakF, wF/total)
	}
}
