package trl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/cli"
	"github.com/rlpipe/rlpipe/internal/configtest"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// harness is one store with the demo's dataset (rlpipe dataset arith
// main: 4,096 training problems, 500 held out), the embedded tiny-arith
// and its held-out exact pass@1 before training.
type harness struct {
	dir, store string
	model      *tiny.Model
	heldout    []tables.Prompt
	base       float64
}

func newHarness(b *testing.B) *harness {
	b.Helper()
	h := &harness{dir: b.TempDir()}
	h.store = filepath.Join(h.dir, "store")
	h.cli(b, nil, "init-store")
	h.cli(b, nil, "dataset", "arith", "main")
	held := filepath.Join(h.dir, "heldout.parquet")
	h.cli(b, nil, "export", "main:data/arith-heldout.parquet", held)
	var err error
	if h.heldout, err = tables.ReadFile(held, tables.Prompts); err != nil {
		b.Fatal(err)
	}
	if h.model, err = tiny.Embedded(); err != nil {
		b.Fatal(err)
	}
	h.base = h.exactPass(b, "")
	return h
}

// cli runs rlpipe in process on the harness's store, with opts, and
// returns what it printed; a command that fails fails the benchmark with
// its output.
func (h *harness) cli(b *testing.B, opts []cli.Option, args ...string) string {
	b.Helper()
	var out, errb bytes.Buffer
	if code := cli.Main(append([]string{"--store", h.store}, args...), nil, &out, &errb, opts...); code != cli.ExitOK {
		b.Fatalf("rlpipe %s: exit %d\n%s%s", strings.Join(args, " "), code, out.Bytes(), tail(errb.String(), 40))
	}
	return out.String()
}

// exactPass is the held-out exact pass@1 (the mean over the 500
// problems of the probability that one sample at temperature 1 is the
// answer) of tiny-arith with the PEFT adapter in dir ("" for none):
// rlpipe's evaluator, the figure the demo's eval prints as
// exact_pass@1, for rlpipe's adapters and TRL's alike.
func (h *harness) exactPass(b *testing.B, dir string) float64 {
	b.Helper()
	p, err := h.model.ExactPass(context.Background(), dir, h.heldout)
	if err != nil {
		b.Fatalf("exact pass@1 of %q: %v", dir, err)
	}
	s := 0.0
	for _, v := range p {
		s += v
	}
	return s / float64(len(p))
}

// demo is a run of examples/arithmetic/pipeline.yaml as the benchmarks
// change it: its name, seed, iterations and overlap, no evaluation
// during the run (the benchmark evaluates the last adapter itself), and
// a line of the algorithms' table.
type demo struct {
	run        string
	seed       int
	iterations int
	staleness  int
	alg        algorithm
}

// config is the demo's pipeline.yaml with d's changes.
func (d demo) config(b *testing.B) string {
	b.Helper()
	raw, err := os.ReadFile("../../examples/arithmetic/pipeline.yaml")
	if err != nil {
		b.Fatal(err)
	}
	src := string(raw)
	i := strings.Index(src, "\neval:\n")
	j := strings.Index(src[i+1:], "\n\n")
	if i < 0 || j < 0 {
		b.Fatal("examples/arithmetic/pipeline.yaml no longer has an eval section ending in a blank line; update this benchmark")
	}
	src = src[:i+1] + src[i+1+j+2:]
	trainer := "trainer: {lr: 2.0e-3}"
	if d.alg.trainer != "" {
		trainer = "trainer: {lr: 2.0e-3, " + d.alg.trainer + "}"
	}
	src = configtest.Edit(b, "examples/arithmetic/pipeline.yaml", src, map[string]string{
		"run: arith\n":            "run: " + d.run + "\n",
		"seed: 1\niterations: 60": fmt.Sprintf("seed: %d\niterations: %d", d.seed, d.iterations),
		"max_staleness: 1":        fmt.Sprintf("max_staleness: %d", d.staleness),
		"trainer: {lr: 2.0e-3}":   trainer,
		"  eval: {}\n":            "",
		"spec: reward.yaml":       "spec: " + configtest.Abs(b, "../../examples/arithmetic/reward.yaml"),
	})
	if d.alg.advantages != "" {
		src += "\nadvantages: " + d.alg.advantages + "\n"
	}
	if d.alg.extra != "" {
		src += "\n" + d.alg.extra + "\n"
	}
	return src
}

// rlpipeRun is what one `rlpipe run` of a demo measured.
type rlpipeRun struct {
	wall time.Duration
	// cpu is the process's CPU time over the whole run, setup included.
	cpu time.Duration
	// steps are the iterations' times: from one iteration's first task
	// starting to the next one's, everything the loop does (tasks,
	// engine, commit, events), for iterations 2 to N−1 (the first warms
	// up; the last has no successor in the events).
	steps []iterationTimes
	// adapter is the last iteration's adapter, exported.
	adapter string
}

// iterationTimes split an iteration: each task's own time, and the
// rest (the engine between tasks, the iteration's commit, the events).
type iterationTimes struct {
	total time.Duration
	// cpu is the process's CPU time (user and system, every thread: the
	// train task's two shards add up) over the same span as total.
	cpu   time.Duration
	tasks map[string]time.Duration
}

// stages are the loop's tasks in the order an iteration runs them.
var stages = []string{"sample", "generate", "reward", "advantages", "train", "health"}

// run runs d in process as `rlpipe run -f` and reads its timings from
// the run's events (events/NNNNNN.jsonl); with RLPIPE_BENCH_CPUPROFILE
// set, the run is profiled into that file (the last run's profile
// stays).
func (h *harness) run(b *testing.B, d demo) rlpipeRun {
	b.Helper()
	cfg := filepath.Join(h.dir, d.run+".yaml")
	if err := os.WriteFile(cfg, []byte(d.config(b)), 0o644); err != nil {
		b.Fatal(err)
	}
	if p := os.Getenv("RLPIPE_BENCH_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	// cpu[n] is the process's CPU time when iteration n's first task
	// started (the run is the only work of this process meanwhile).
	var mu sync.Mutex
	cpu := make([]time.Duration, d.iterations+1)
	clock := cli.WithRunEvents(func(e pipeline.Event) {
		if e.Kind != pipeline.EventStarted || e.Iteration < 1 || e.Iteration > d.iterations {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if cpu[e.Iteration] == 0 {
			cpu[e.Iteration] = processCPU()
		}
	})
	start, startCPU := time.Now(), processCPU()
	h.cli(b, []cli.Option{clock}, "run", "-f", cfg, "--log-level", "warn")
	r := rlpipeRun{wall: time.Since(start), cpu: processCPU() - startCPU}
	branch := runs.Branch(d.run)
	evDir := filepath.Join(h.dir, d.run+"-events")
	h.cli(b, nil, "export", branch+":"+runs.EventsPrefix, evDir)
	starts := make([]time.Time, d.iterations+1)
	tasks := make([]map[string]time.Duration, d.iterations+1)
	for n := 1; n <= d.iterations; n++ {
		raw, err := os.ReadFile(filepath.Join(evDir, strings.TrimPrefix(runs.EventsPath(n), runs.EventsPrefix)))
		if err != nil {
			b.Fatal(err)
		}
		tasks[n] = map[string]time.Duration{}
		for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
			var e pipeline.Event
			if err := json.Unmarshal(line, &e); err != nil {
				b.Fatalf("%s: %v", runs.EventsPath(n), err)
			}
			switch e.Kind {
			case pipeline.EventStarted:
				if starts[n].IsZero() || e.Time.Before(starts[n]) {
					starts[n] = e.Time
				}
			case pipeline.EventFinished:
				tasks[n][e.Task] += e.Duration
			}
		}
	}
	for n := 2; n < d.iterations; n++ {
		r.steps = append(r.steps, iterationTimes{total: starts[n+1].Sub(starts[n]), cpu: cpu[n+1] - cpu[n], tasks: tasks[n]})
	}
	r.adapter = filepath.Join(h.dir, d.run+"-adapter")
	h.cli(b, nil, "export", branch+":"+runs.AdapterPath(d.iterations)+"/", r.adapter)
	return r
}

// breakdown is the mean time of an iteration and of each of its
// stages over steps, the rest being the engine, the commit and the
// events ("engine+commit").
func breakdown(steps []iterationTimes) (total time.Duration, parts []part) {
	if len(steps) == 0 {
		return 0, nil
	}
	sum := map[string]time.Duration{}
	for _, s := range steps {
		total += s.total
		for k, v := range s.tasks {
			sum[k] += v
		}
	}
	n := time.Duration(len(steps))
	total /= n
	rest := total
	for _, st := range stages {
		parts = append(parts, part{st, sum[st] / n})
		rest -= sum[st] / n
	}
	return total, append(parts, part{"engine+commit", rest})
}

type part struct {
	name string
	d    time.Duration
}

// formatBreakdown is one line: "118.2 ms: sample 7.9 (7%) generate …".
func formatBreakdown(total time.Duration, parts []part) string {
	var s strings.Builder
	fmt.Fprintf(&s, "%.1f ms:", ms(total))
	for _, p := range parts {
		fmt.Fprintf(&s, " %s %.1f (%.0f%%)", p.name, ms(p.d), 100*float64(p.d)/float64(total))
	}
	return s.String()
}

// processCPU is the CPU time this process has used: user and system,
// every thread. It is called from the engine's goroutines, where a
// benchmark cannot fail; getrusage of RUSAGE_SELF fails only on a bad
// address.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(fmt.Sprintf("getrusage: %v", err))
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAverage is /proc/loadavg's first three figures ("" where it
// cannot be read): how busy the machine was, beside the figures.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func cpuTotals(steps []iterationTimes) []float64 {
	var xs []float64
	for _, s := range steps {
		xs = append(xs, s.cpu.Seconds())
	}
	return xs
}

func totals(steps []iterationTimes) []float64 {
	var xs []float64
	for _, s := range steps {
		xs = append(xs, s.total.Seconds())
	}
	return xs
}

// countFromEnv is the number of steps or iterations the variable name
// sets (at least 3: the first warms up, the last has no successor in the
// events), or def when it is not set.
func countFromEnv(b *testing.B, name string, def int) int {
	b.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 3 {
		b.Fatalf("%s=%q: want a number of at least 3", name, s)
	}
	return n
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = slices.Clone(lines[len(lines)-n:])
	}
	return strings.Join(lines, "\n") + "\n"
}
