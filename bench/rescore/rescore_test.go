package rescore

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/internal/benchstat"
)

// defaultRows is the size of the comparison: 125,000 prompts × 8.
const defaultRows = 1_000_000

// benchRows reads RLPIPE_BENCH_ROWS (default one million).
func benchRows(tb testing.TB) int {
	s := os.Getenv("RLPIPE_BENCH_ROWS")
	if s == "" {
		return defaultRows
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < samplesPerPrompt {
		tb.Fatalf("RLPIPE_BENCH_ROWS=%q: want a number of rows, at least %d", s, samplesPerPrompt)
	}
	return n
}

// only reads RLPIPE_BENCH_ONLY: a comma-separated list of contenders to
// run alone, for profiling one of them (no check, no ratios).
func only() map[string]bool {
	s := os.Getenv("RLPIPE_BENCH_ONLY")
	if s == "" {
		return nil
	}
	m := map[string]bool{}
	for _, name := range strings.Split(s, ",") {
		m[strings.TrimSpace(name)] = true
	}
	return m
}

// benchRounds reads RLPIPE_BENCH_ROUNDS: how many times each contender
// runs (default 5).
func benchRounds(tb testing.TB) int {
	s := os.Getenv("RLPIPE_BENCH_ROUNDS")
	if s == "" {
		return 5
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		tb.Fatalf("RLPIPE_BENCH_ROUNDS=%q: want a number of rounds, at least 1", s)
	}
	return n
}

// timings are a contender's runs: their wall and CPU times, in order.
type timings struct{ wall, cpu []time.Duration }

// best is the fastest run's wall time and its CPU time.
func (t timings) best() (wall, cpu time.Duration) {
	k := 0
	for i, w := range t.wall {
		if w < t.wall[k] {
			k = i
		}
	}
	return t.wall[k], t.cpu[k]
}

// runAll runs every contender on d (those of RLPIPE_BENCH_ONLY if set)
// rounds times and returns each one's timings and the rows each wrote.
func runAll(tb testing.TB, d *dataset, rounds int, which map[string]bool) (runs []timings, outs [][]result) {
	tb.Helper()
	ctx := context.Background()
	runs = make([]timings, len(contenders))
	paths := make([]string, len(contenders))
	for round := 0; round < rounds; round++ {
		// Interleaved, so that a slow moment of a shared machine does
		// not fall on one contender's every run, and in the other order
		// every other round, so that none always follows the same one.
		order := make([]int, len(contenders))
		for i := range order {
			order[i] = i
			if round%2 == 1 {
				order[i] = len(contenders) - 1 - i
			}
		}
		for _, k := range order {
			c := contenders[k]
			if which != nil && !which[c.name] {
				continue
			}
			paths[k] = filepath.Join(d.dir, "rewards-"+c.name+c.ext)
			os.Remove(paths[k])
			runtime.GC()
			el, used, err := timed(ctx, c, d, paths[k])
			if err != nil {
				tb.Fatalf("%s: %v", c.name, err)
			}
			runs[k].wall, runs[k].cpu = append(runs[k].wall, el), append(runs[k].cpu, used)
		}
	}
	if which != nil {
		return runs, nil
	}
	for k, c := range contenders {
		rs, err := readResults(d, paths[k])
		if err != nil {
			tb.Fatalf("%s: %v", c.name, err)
		}
		outs = append(outs, rs)
	}
	return runs, outs
}

// roundRatios are b's time over a's in each round: a's speed against
// b's, measured a few seconds apart.
func roundRatios(a, b timings) []float64 {
	out := make([]float64, len(a.wall))
	for i := range a.wall {
		out[i] = b.wall[i].Seconds() / a.wall[i].Seconds()
	}
	return out
}

// agree fails tb unless every contender wrote the same rows as the first
// (rlpipe), to the last bit, and returns each one's sums.
func agree(tb testing.TB, d *dataset, outs [][]result) []totals {
	tb.Helper()
	var sums []totals
	for k, c := range contenders {
		if n, first := diff(d, outs[0], outs[k], 5); n > 0 {
			for _, f := range first {
				row, _ := strconv.Atoi(f[len("row "):indexByte(f, ' ', len("row "))])
				tb.Logf("%s\n  completion: %q", f, completionOf(tb, d, row))
			}
			tb.Fatalf("%s wrote %d rows that differ from %s's (correctness, not timing)", c.name, n, contenders[0].name)
		}
		sums = append(sums, sumUp(outs[k]))
	}
	for k := range sums {
		if sums[k] != sums[0] {
			tb.Fatalf("reward sums differ: %s %+v, %s %+v", contenders[0].name, sums[0], contenders[k].name, sums[k])
		}
		if sums[k].rows != d.rows {
			tb.Fatalf("%s wrote %d rows of %d", contenders[k].name, sums[k].rows, d.rows)
		}
	}
	return sums
}

func indexByte(s string, c byte, from int) int {
	for i := from; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return len(s)
}

// completionOf reads row i's completion back from the JSON lines, to
// show what a disagreement is about.
func completionOf(tb testing.TB, d *dataset, i int) string {
	f, err := os.Open(d.trajectoriesJSONL)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for k := 0; sc.Scan(); k++ {
		if k == i {
			var t trajectoryJSON
			json.Unmarshal(sc.Bytes(), &t)
			return t.Completion
		}
	}
	return "?"
}

// TestAgree checks, on a small data set, that the three implementations
// of the reward give the same value on every row and that the data
// exercises every answer layout, right and wrong answers, with and
// without the length penalty.
func TestAgree(t *testing.T) {
	d := generate(t, t.TempDir(), 20_000)
	for k, n := range d.kinds {
		if n == 0 {
			t.Errorf("no completion with the answer as %s", kindNames[k])
		}
	}
	_, outs := runAll(t, d, 1, nil)
	sums := agree(t, d, outs)
	s := sums[0]
	if s.ok == s.rows || s.ok < s.rows*9/10 {
		t.Errorf("%d of %d rows scored: want about 99%% (1%% time out)", s.ok, s.rows)
	}
	if s.correct < float64(s.ok)/4 || s.correct > float64(s.ok)*3/4 {
		t.Errorf("%v of %d rows correct: want a mix of right and wrong", s.correct, s.ok)
	}
	if s.format == float64(s.ok) || s.format < float64(s.ok)/2 {
		t.Errorf("%v of %d rows formatted: want most but not all", s.format, s.ok)
	}
	if s.length == 0 {
		t.Error("no length penalty on any row")
	}
	t.Logf("%d rows: %d scored, correct %v, format %v, length %.3f, total %.3f", s.rows, s.ok, s.correct, s.format, s.length, s.total)
}

// BenchmarkRescore rescores RLPIPE_BENCH_ROWS generated rollouts (one
// million by default) with rlpipe, DuckDB and CPython, checks that they
// agree row by row, and prints each one's best rows/s of
// RLPIPE_BENCH_ROUNDS runs (5 by default) and the ratios: of the best
// runs, and the median of the rounds' ratios. Run it once: -benchtime 1x.
func BenchmarkRescore(b *testing.B) {
	n := benchRows(b)
	rounds := benchRounds(b)
	start := time.Now()
	d := generate(b, b.TempDir(), n)
	fmt.Printf("rescore: generated %d rollouts (%d prompts × %d, %.0f-character completions, trajectories.parquet %.0f MB) in %.1fs\n",
		n, d.prompts, samplesPerPrompt, float64(d.completionBytes)/float64(n), d.trajectoriesParqMB, time.Since(start).Seconds())
	fmt.Printf("rescore: %d cores; DuckDB %s (Go module github.com/duckdb/duckdb-go/v2); %s\n",
		runtime.NumCPU(), duckVersion(), pythonVersion())

	which := only()
	runs, outs := runAll(b, d, rounds, which)
	if which != nil {
		for k, c := range contenders {
			if which[c.name] {
				wall, cpu := runs[k].best()
				fmt.Printf("rescore: %-8s %6.2fs  %8.0f rows/s  (best of %d; %5.2f CPU-s; alone: no check)\n",
					c.name, wall.Seconds(), float64(n)/wall.Seconds(), rounds, cpu.Seconds())
			}
		}
		return
	}
	sums := agree(b, d, outs)

	rate := make([]float64, len(contenders))
	for k, c := range contenders {
		wall, cpu := runs[k].best()
		rate[k] = float64(n) / wall.Seconds()
		fmt.Printf("rescore: %-8s %6.2fs  %8.0f rows/s  (best of %d; %5.2f CPU-s, %8.0f rows per CPU-second)\n",
			c.name, wall.Seconds(), rate[k], rounds, cpu.Seconds(), float64(n)/cpu.Seconds())
		b.ReportMetric(rate[k], c.name+"_rows/s")
	}
	perRound := roundRatios(runs[0], runs[1])
	fmt.Printf("rescore: rlpipe/duckdb  %.2f×  (target ≥ 1×; each round: %s)\n", rate[0]/rate[1], ratios(perRound))
	fmt.Printf("rescore: rlpipe/cpython %.2f×  (target ≥ 5×)\n", rate[0]/rate[2])
	b.ReportMetric(rate[0]/rate[1], "rlpipe/duckdb")
	b.ReportMetric(benchstat.Median(perRound), "rlpipe/duckdb_median_round")
	b.ReportMetric(rate[0]/rate[2], "rlpipe/cpython")
	for k, c := range contenders {
		s := sums[k]
		fmt.Printf("rescore: %-8s reward sum %.9f over %d scored rows (correct %.0f, format %.0f, length %.3f)\n",
			c.name, s.total, s.ok, s.correct, s.format, s.length)
	}
	fmt.Println("rescore: every row agrees across the three")
}

// ratios prints v as "1.02 0.98 …".
func ratios(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strings.Join(s, " ")
}
