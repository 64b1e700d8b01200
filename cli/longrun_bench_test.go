package cli

import (
	"context"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/ui"
)

// longRunIterations is how far BenchmarkLongRun takes its run:
// $RLPIPE_BENCH_ITERATIONS, default 2,000.
func longRunIterations(b *testing.B) int {
	b.Helper()
	n := 2000
	if v := os.Getenv("RLPIPE_BENCH_ITERATIONS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 60 {
			b.Fatalf("RLPIPE_BENCH_ITERATIONS=%q: want a number of at least 60", v)
		}
	}
	return n
}

// longRunConfig is the stand-in example without sleeps, run to iterations.
func longRunConfig(b *testing.B, iterations int) string {
	b.Helper()
	raw, err := os.ReadFile("../examples/standin/pipeline.yaml")
	if err != nil {
		b.Fatal(err)
	}
	s := string(raw)
	for _, d := range []string{"100ms", "200ms", "1s"} {
		s = strings.ReplaceAll(s, ", sleep: "+d, "")
	}
	s = strings.Replace(s, "iterations: 6", "iterations: "+strconv.Itoa(iterations), 1)
	s = strings.Replace(s, "run: standin", "run: long", 1)
	if strings.Contains(s, "sleep:") || !strings.Contains(s, "run: long") {
		b.Fatalf("the example changed; update this benchmark:\n%s", s)
	}
	return s
}

// storeBytes is the size of the files under dir.
func storeBytes(b *testing.B, dir string) int64 {
	b.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// longRunViews are the costs BenchmarkLongRun compares at two points of
// one run.
type longRunViews struct {
	iteration              time.Duration // per iteration, over the next 20 (commit, cache lookups and records included)
	resume                 time.Duration // a new `rlpipe run` that adds one iteration
	status, report, log    time.Duration
	diffFirstLast, uiRun   time.Duration
	storeBytesPerIteration float64
}

// BenchmarkLongRun runs the stand-in loop (no sleeps: every cost is the
// engine's and the store's) to 2,000 iterations and measures, at
// iteration 20 and again at 2,000 on the same store, what grows with a
// run: the time per iteration over the next 20 (build, cache lookups,
// task records, commit), resuming in a new process (`rlpipe run` adding
// one iteration), `rlpipe status RUN`, `rlpipe report RUN`, the UI's run
// page API on a fresh server, `rlpipe log` of the run branch, `rlpipe
// diff` between the first and the last iteration, and the store's bytes
// per iteration (averaged over the run). It prints each at 20, at 2,000
// and their ratio.
// Targets: every per-iteration cost ≤ 1.2× at 2,000 against 20; whole-run
// views (status, report, UI, log, diff) no faster than linear, so
// ratio/(2000/20) ≤ 1; status and the UI page under a second at 2,000.
// RLPIPE_BENCH_ITERATIONS sets another end (at least 60).
func BenchmarkLongRun(b *testing.B) {
	end := longRunIterations(b)
	ctx := context.Background()
	for b.Loop() {
		h := newStore(b)
		h.ok("import", "../examples/standin/prompts.jsonl", "main:data/prompts.parquet", "--table", "prompts")
		h.ok("commit", "main", "-m", "add prompts")
		runTo := func(n int) time.Duration {
			cfg := h.file("pipeline-"+strconv.Itoa(n)+".yaml", longRunConfig(b, n))
			start := time.Now()
			h.ok("run", "-f", cfg, "--no-report")
			return time.Since(start)
		}
		timed := func(f func()) time.Duration {
			start := time.Now()
			f()
			return time.Since(start)
		}
		measure := func(at int) longRunViews {
			var v longRunViews
			v.storeBytesPerIteration = float64(storeBytes(b, h.store)) / float64(at)
			v.status = timed(func() { h.ok("status", "long") })
			v.report = timed(func() { h.ok("report", "long", "--out", filepath.Join(h.dir, "report.html")) })
			v.log = timed(func() { h.ok("log", "runs-long") })
			first := "runs-long~" + strconv.Itoa(at-1)
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
			v.resume = runTo(at + 1)
			v.iteration = runTo(at+21) / 20
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
		// The average over the run, not the bytes the next iteration adds:
		// the store grows its files in steps (bbolt by megabytes), so the
		// growth over 20 iterations is too coarse to read. bench/README.md
		// says what an iteration adds at 20 and at 2,000.
		b.ReportMetric(early.storeBytesPerIteration, "store_avg_bytes/iteration_20")
		b.ReportMetric(late.storeBytesPerIteration, "store_avg_bytes/iteration_"+strconv.Itoa(end))
	}
}
