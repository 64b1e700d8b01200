package cli

import (
	"strings"
	"testing"
	"time"
)

// BenchmarkDemoOverlap runs the arithmetic demo (20 iterations, no
// evaluation) with one-step overlap and on-policy, each on a fresh store,
// and reports the sequential/pipelined wall-time ratio and the mean
// per-iteration time of each stage.
func BenchmarkDemoOverlap(b *testing.B) {
	src := arithExample(b, map[string]string{"iterations: 60": "iterations: 20"})
	if i := strings.Index(src, "\neval:"); i >= 0 {
		j := strings.Index(src[i+1:], "\n\n")
		src = src[:i+1] + src[i+1+j+2:]
	}
	src = strings.Replace(src, "  eval: {}\n", "", 1)
	seq := strings.Replace(src, "max_staleness: 1", "max_staleness: 0", 1)
	var pipelined, sequential time.Duration
	for range b.N {
		for _, c := range []struct {
			cfg string
			d   *time.Duration
		}{{src, &pipelined}, {seq, &sequential}} {
			h := newStore(b)
			h.ok("dataset", "arith", "main")
			f := h.file("pipeline.yaml", c.cfg)
			start := time.Now()
			h.ok("run", "-f", f)
			*c.d += time.Since(start)
		}
	}
	b.ReportMetric(sequential.Seconds()/pipelined.Seconds(), "sequential/pipelined")
	b.ReportMetric(pipelined.Seconds()/float64(b.N), "pipelined-s/run")
	b.ReportMetric(sequential.Seconds()/float64(b.N), "sequential-s/run")
}

// BenchmarkEvalBackfill back-fills 10 checkpoints of a finished run of
// which 9 were evaluated before (cache hits), and evaluates the tenth
// alone on an identical store, and reports the ratio: the cost of
// back-filling should be the one missing checkpoint, not ten.
func BenchmarkEvalBackfill(b *testing.B) {
	var backfill, single time.Duration
	for range b.N {
		cached, cfg := smallArithRun(b)
		fresh, _ := smallArithRun(b)
		src := strings.Replace(readFile(b, cfg), "iterations: 4", "iterations: 9", 1)
		src = strings.Replace(src, "every: 2", "every: 100", 1)
		cfgC, cfgF := cached.file("nine.yaml", src), fresh.file("nine.yaml", src)
		cached.ok("run", "-f", cfgC, "--no-report")
		fresh.ok("run", "-f", cfgF, "--no-report")
		cached.ok("eval", "-f", cfgC, "--checkpoints", "0,1,2,3,4,5,6,7,8")
		start := time.Now()
		cached.ok("eval", "-f", cfgC, "--checkpoints", "0,1,2,3,4,5,6,7,8,9")
		backfill += time.Since(start)
		start = time.Now()
		fresh.ok("eval", "-f", cfgF, "--checkpoints", "9")
		single += time.Since(start)
	}
	b.ReportMetric(backfill.Seconds()/single.Seconds(), "backfill10/single")
	b.ReportMetric(backfill.Seconds()/float64(b.N), "backfill-s")
	b.ReportMetric(single.Seconds()/float64(b.N), "single-s")
}
