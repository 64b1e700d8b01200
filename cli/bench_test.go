package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkDemoOverlap runs the arithmetic demo (20 iterations, no
// evaluation) with one-step overlap and on-policy, each on a fresh store,
// and reports the sequential/pipelined wall-time ratio and the mean
// per-iteration time of each stage.
func BenchmarkDemoOverlap(b *testing.B) {
	raw, err := os.ReadFile("../examples/arithmetic/pipeline.yaml")
	if err != nil {
		b.Fatal(err)
	}
	spec, _ := filepath.Abs("../examples/arithmetic/reward.yaml")
	src := strings.Replace(string(raw), "iterations: 60", "iterations: 20", 1)
	src = strings.Replace(src, "spec: reward.yaml", "spec: "+spec, 1)
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
