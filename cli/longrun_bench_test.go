package cli

import (
	"context"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/internal/benchstat"
	"github.com/rlpipe/rlpipe/internal/testproc"
	"github.com/rlpipe/rlpipe/ui"
)

// benchIterations is how far a long-run benchmark takes its run: the
// number in the environment variable name, at least 60, or def.
func benchIterations(b *testing.B, name string, def int) int {
	b.Helper()
	return testproc.IntEnv(b, name, def, 60)
}

// longRunConfig is the stand-in example without sleeps, run to
// iterations, generating samplesPerPrompt trajectories for each of its 8
// prompts an iteration (the example's 4 when 0).
func longRunConfig(b *testing.B, iterations, samplesPerPrompt int) string {
	b.Helper()
	s := readFile(b, "../examples/standin/pipeline.yaml")
	for _, d := range []string{"100ms", "200ms", "1s"} {
		s = strings.ReplaceAll(s, ", sleep: "+d, "")
	}
	s = strings.Replace(s, "iterations: 6", "iterations: "+strconv.Itoa(iterations), 1)
	s = strings.Replace(s, "run: standin", "run: long", 1)
	if samplesPerPrompt > 0 {
		s = strings.Replace(s, "samples_per_prompt: 4", "samples_per_prompt: "+strconv.Itoa(samplesPerPrompt), 1)
	}
	// A cel reward, and an eval section that evaluates the start and the
	// last iteration of each leg: `rlpipe eval --checkpoints all` then
	// evaluates the rest.
	s = strings.Replace(s, "  reward:   {kind: standin}", "  reward:   {kind: cel, spec: reward.yaml}", 1)
	s += "eval: {set: main:data/heldout.parquet, every: 100000, n: 4, k: [1, 4], max_tokens: 8, seed: 3}\n"
	if strings.Contains(s, "sleep:") || !strings.Contains(s, "run: long") || !strings.Contains(s, "kind: cel") ||
		(samplesPerPrompt > 0 && !strings.Contains(s, "samples_per_prompt: "+strconv.Itoa(samplesPerPrompt))) {
		b.Fatalf("the example changed; update this benchmark:\n%s", s)
	}
	return s
}

// longRunReward is the cel reward of the long-run benchmarks.
const longRunReward = "components:\n  - name: correct\n    expr: 'num_equal(extract_answer(completion), answer, 1e-6) ? 1.0 : 0.0'\n"

// storeUse is what a store holds, in bytes: the keys and values of its
// metadata records (all buckets, nested ones included), of which its
// metaranges (tree roots and the nodes under them) and ranges, and its
// blob files. Records, not the size of meta.db: bbolt grows its file in
// steps of megabytes and reuses freed pages, so the file's size over 20
// iterations is too coarse to read, and the records are what a commit
// writes.
type storeUse struct {
	records, metaranges, ranges, blobs int64
}

func (u storeUse) total() int64 { return u.records + u.blobs }

func (u storeUse) minus(o storeUse) storeUse {
	return storeUse{u.records - o.records, u.metaranges - o.metaranges, u.ranges - o.ranges, u.blobs - o.blobs}
}

func measureStore(b *testing.B, dir string) storeUse {
	b.Helper()
	var u storeUse
	err := filepath.WalkDir(filepath.Join(dir, "blobs"), func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			u.blobs += fi.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, "meta.db"), 0o644, &bolt.Options{ReadOnly: true, Timeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var walk func(bk *bolt.Bucket) int64
	walk = func(bk *bolt.Bucket) int64 {
		var n int64
		bk.ForEach(func(k, v []byte) error {
			n += int64(len(k))
			if v == nil {
				n += walk(bk.Bucket(k))
			} else {
				n += int64(len(v))
			}
			return nil
		})
		return n
	}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
			n := int64(len(name)) + walk(bk)
			u.records += n
			switch string(name) {
			case "metaranges":
				u.metaranges += n
			case "ranges":
				u.ranges += n
			}
			return nil
		})
	})
	if err != nil {
		b.Fatal(err)
	}
	return u
}

// medianOf times f five times and returns the median: the whole-run views
// take about a millisecond at 20 iterations, where one timing on a shared
// machine can be off by 2×.
func medianOf(f func()) time.Duration {
	var ds []time.Duration
	for range 5 {
		start := time.Now()
		f()
		ds = append(ds, time.Since(start))
	}
	return benchstat.Median(ds)
}

// longRunViews are the costs BenchmarkLongRun compares at two points of
// one run.
type longRunViews struct {
	iteration            time.Duration // per iteration, over the next 20 (commit, cache lookups and records included)
	resume               time.Duration // a new `rlpipe run` that adds one iteration
	status, report, log  time.Duration
	diffFirstLast, uiRun time.Duration
	evalAll              time.Duration // `rlpipe eval --checkpoints all`, every checkpoint cached
	// What the store grew by over the 20 iterations after the point, per
	// iteration: everything, and its metaranges alone.
	storeBytesPerIteration, metarangeBytesPerIteration float64
}

// BenchmarkLongRun runs the stand-in loop (no sleeps: every cost is the
// engine's and the store's) to 2,000 iterations and measures, at
// iteration 20 and again at 2,000 on the same store, what grows with a
// run: the time per iteration over the next 20 (build, cache lookups,
// task records, commit), resuming in a new process (`rlpipe run` adding
// one iteration), `rlpipe status RUN`, `rlpipe report RUN`, the UI's run
// page API on a fresh server, `rlpipe log` of the run branch, `rlpipe
// diff` between the first and the last iteration, `rlpipe eval
// --checkpoints all` with every checkpoint's calls cached (each of these
// whole-run views the median of five timings), and the bytes the store grew by per
// iteration over the 20 iterations after the point (all of them, and the
// metaranges': the trees' roots and the nodes under them). It prints each
// at 20, at 2,000 and their ratio.
// Targets: every per-iteration cost (time, store bytes) ≤ 1.2× at 2,000
// against 20; whole-run
// views (status, report, UI, log, diff, eval) no faster than linear, so
// ratio/(2000/20) ≤ 1; status and the UI page under a second at 2,000.
// RLPIPE_BENCH_ITERATIONS sets another end (at least 60).
func BenchmarkLongRun(b *testing.B) {
	longRun(b, benchIterations(b, "RLPIPE_BENCH_ITERATIONS", 2000), 0)
}

// BenchmarkLongRunLargeTables is BenchmarkLongRun with 100,000-row
// trajectories an iteration (8 prompts × 12,500 samples, and as many
// rewards and advantages), taken to 200 iterations
// ($RLPIPE_BENCH_LARGE_ITERATIONS): the same figures, at 20 and at 200,
// with the same targets.
func BenchmarkLongRunLargeTables(b *testing.B) {
	longRun(b, benchIterations(b, "RLPIPE_BENCH_LARGE_ITERATIONS", 200), 12500)
}

// longRun is the body of both benchmarks: the stand-in loop with
// samplesPerPrompt samples a prompt (0: the example's), measured at
// iteration 20 and at end.
func longRun(b *testing.B, end, samplesPerPrompt int) {
	ctx := context.Background()
	for b.Loop() {
		h := newStore(b)
		h.ok("import", "../examples/standin/prompts.jsonl", "main:data/prompts.parquet", "--table", "prompts")
		h.ok("import", h.file("heldout.jsonl", standinHeldout(b, 10)), "main:data/heldout.parquet", "--table", "prompts")
		h.ok("commit", "main", "-m", "add prompts")
		h.file("reward.yaml", longRunReward)
		// Each `eval --checkpoints all` that evaluates new checkpoints
		// commits once, between iterations: the diff's first iteration
		// is that many commits further back.
		evalCommits := 0
		runTo := func(n int) time.Duration {
			cfg := h.file("pipeline-"+strconv.Itoa(n)+".yaml", longRunConfig(b, n, samplesPerPrompt))
			start := time.Now()
			h.ok("run", "-f", cfg, "--no-report")
			return time.Since(start)
		}
		timed := medianOf
		measure := func(at int) longRunViews {
			var v longRunViews
			v.status = timed(func() { h.ok("status", "long") })
			v.report = timed(func() { h.ok("report", "long", "--out", filepath.Join(h.dir, "report.html")) })
			v.log = timed(func() { h.ok("log", "runs-long") })
			first := "runs-long~" + strconv.Itoa(at-1+evalCommits)
			v.diffFirstLast = timed(func() { h.ok("diff", first, "runs-long", "--two-dot") })
			st, err := local.Open(ctx, h.store, nil)
			if err != nil {
				b.Fatal(err)
			}
			v.uiRun = timed(func() {
				srv, err := ui.New(st, nil)
				if err != nil {
					b.Fatal(err)
				}
				rec := httptest.NewRecorder()
				srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/api/runs/long", nil))
				if rec.Code != http.StatusOK {
					b.Fatalf("GET /api/runs/long at iteration %d: %d %s", at, rec.Code, rec.Body)
				}
			})
			st.Close()
			// Evaluate the checkpoints the loop did not, then time
			// evaluating them all again, every call a cache hit.
			cfg := h.file("pipeline-"+strconv.Itoa(at)+".yaml", longRunConfig(b, at, samplesPerPrompt))
			h.ok("eval", "-f", cfg, "--checkpoints", "all")
			evalCommits++
			v.evalAll = timed(func() { h.ok("eval", "-f", cfg, "--checkpoints", "all") })
			v.resume = runTo(at + 1)
			before := measureStore(b, h.store)
			v.iteration = runTo(at+21) / 20
			grew := measureStore(b, h.store).minus(before)
			v.storeBytesPerIteration = float64(grew.total()) / 20
			v.metarangeBytesPerIteration = float64(grew.metaranges) / 20
			return v
		}
		runTo(20)
		early := measure(20)
		runTo(end)
		late := measure(end)

		growth := float64(end) / 20
		per := func(name string, a, z time.Duration) {
			b.ReportMetric(a.Seconds()*1000, name+"_20_ms")
			b.ReportMetric(z.Seconds()*1000, name+"_"+strconv.Itoa(end)+"_ms")
			b.ReportMetric(z.Seconds()/a.Seconds(), name+"_ratio")
		}
		whole := func(name string, a, z time.Duration) {
			per(name, a, z)
			b.ReportMetric(z.Seconds()/a.Seconds()/growth, name+"_ratio/linear")
		}
		per("iteration", early.iteration, late.iteration)
		per("resume", early.resume, late.resume)
		whole("status", early.status, late.status)
		whole("report", early.report, late.report)
		whole("ui_run", early.uiRun, late.uiRun)
		whole("log", early.log, late.log)
		whole("diff", early.diffFirstLast, late.diffFirstLast)
		whole("eval_all", early.evalAll, late.evalAll)
		perIter := func(name string, a, z float64) {
			b.ReportMetric(a, name+"/iteration_20")
			b.ReportMetric(z, name+"/iteration_"+strconv.Itoa(end))
			b.ReportMetric(z/a, name+"/iteration_ratio")
		}
		perIter("store_bytes", early.storeBytesPerIteration, late.storeBytesPerIteration)
		perIter("metarange_bytes", early.metarangeBytesPerIteration, late.metarangeBytesPerIteration)
	}
}
