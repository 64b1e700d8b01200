// Command verdict reads the output of `go test -bench` (a file, or
// standard input) and prints, for every benchmark figure that has a
// target, the figure, the target and MET or NOT MET; a target whose
// benchmark did not run is listed as NOT RUN. It exits 0 whatever the
// verdicts: the figures are for reading, never a timed test. `make bench`
// runs it on what the benchmarks printed.
//
//	go run ./bench/verdict bench.out
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// target is a benchmark figure's goal: Value Op Bound.
type target struct {
	Bench, Metric string
	Op            string // "<=" or ">="
	Bound         float64
	Why           string
}

// targets are the goals docs and issues set, by benchmark and figure
// (bench/README.md; "near 1" there is read as at most 1.5).
var targets = []target{
	{"BenchmarkEngineOverhead", "run_us/task", "<=", 200, "engine time per executed no-op task"},
	{"BenchmarkEngineOverhead", "hit_us/task", "<=", 50, "engine time per cache hit"},
	{"BenchmarkLoopOverlap", "pipelined/ideal", "<=", 1.03, "overlap of generation with training against its ideal (which no run reaches: the DAG's floor is 1.05× it)"},
	{"BenchmarkLoopOverlap", "pipelined/floor", "<=", 1.03, "overlap of generation with training against the DAG's floor"},
	{"BenchmarkResume", "resume/iteration", "<=", 1.5, "resuming a 50-iteration run against one iteration"},
	{"BenchmarkBranchCreate", "large/small", "<=", 1.2, "branch creation in a 1 GiB store against a 1 MiB one"},
	{"BenchmarkDiff10Changes", "100k/10k", "<=", 10, "a 10-path diff in 100k paths against 10k"},
	{"BenchmarkLargeWeightsDir", "write_store/cp", "<=", 1.2, "writing and committing a 2 GB weights directory into the embedded store against cp -r and an fsync of each file"},
	{"BenchmarkLargeWeightsDir", "read_store/cp", "<=", 1.2, "reading a 2 GB weights directory back from the embedded store to a directory against cp -r"},
	{"BenchmarkLargeWeightsDir", "recommit/hash", "<=", 1.5, "committing the same weights directory again against one SHA-256 pass over its files"},
	{"BenchmarkEmbeddedHTTPvsInProcess", "http/inprocess", ">=", 0.8, "sampling over HTTP against in process"},
	{"BenchmarkEvalBackfill", "backfill10/single", "<=", 1.5, "back-filling 10 checkpoints, 9 cached, against the missing one alone"},
	{"BenchmarkTrackersDown", "down/plain", "<=", 1.05, "a loop with a tracker that is down against none"},
	{"BenchmarkTemporalTaskOverhead", "temporal/floor", "<=", 1.5, "a task through Temporal against Temporal's own floor"},
	{"BenchmarkTemporalDemo", "temporal/local", "<=", 1.5, "the arithmetic demo on Temporal (README's setup: one worker process, the driver keeping the books) against the local executor"},
	{"BenchmarkRescore", "rlpipe/duckdb", ">=", 1.0, "rescoring 1M rollouts against DuckDB"},
	{"BenchmarkMathVerify", "worker/floor", ">=", 0.8, "math-verify rows/s through the sandboxed Python worker against the same function in a plain Python loop"},
	{"BenchmarkSkyRLGym", "go/python", ">=", 0.8, "SkyRL-gym gsm8k episodes/s driven from Go through the skyrl_gym worker against Python driving the same worker over the same pipe"},
	{"BenchmarkOpenEnvGoVsPython", "go/python", ">=", 0.8, "OpenEnv episodes/s through rlpipe's Go /ws client against a Python websockets client, same episodes, same server"},
	{"BenchmarkTRLvsRlpipe", "trl/rlpipe", ">=", 2, "TRL's GRPOTrainer seconds a step against rlpipe run's, the demo on-policy"},
	{"BenchmarkTRLvsRlpipe", "gain_rlpipe/trl", ">=", 1, "held-out exact pass@1 gain of rlpipe over TRL's after the same steps"},
	{"BenchmarkProductionIteration", "rlpipe/pyarrow_embedded", "<=", 1.5, "8,192 trajectories of 2,048 tokens written, committed and read back by the trainer through the embedded store against pyarrow writing and reading the same table"},
	{"BenchmarkProductionIteration", "rlpipe/pyarrow_lakefs", "<=", 1.5, "the same through lakeFS (the store server on the loopback) against pyarrow"},
	{"BenchmarkLongRun", "iteration_ratio", "<=", 1.2, "time per iteration at 2,000 iterations against 20"},
	{"BenchmarkLongRun", "resume_ratio", "<=", 1.2, "resuming at 2,000 iterations against 20"},
	{"BenchmarkLongRun", "store_bytes/iteration_ratio", "<=", 1.2, "store bytes an iteration adds at 2,000 iterations against 20"},
	{"BenchmarkLongRun", "status_ratio/linear", "<=", 1, "rlpipe status RUN at 2,000 against 20, over linear growth"},
	{"BenchmarkLongRun", "report_ratio/linear", "<=", 1, "rlpipe report RUN at 2,000 against 20, over linear growth"},
	{"BenchmarkLongRun", "ui_run_ratio/linear", "<=", 1, "the UI's run page at 2,000 against 20, over linear growth"},
	{"BenchmarkLongRun", "log_ratio/linear", "<=", 1, "rlpipe log of the run at 2,000 against 20, over linear growth"},
	{"BenchmarkLongRun", "diff_ratio/linear", "<=", 1, "rlpipe diff first..last at 2,000 against 20, over linear growth"},
	{"BenchmarkLongRun", "eval_all_ratio/linear", "<=", 1, "rlpipe eval --checkpoints all, every call cached, at 2,000 against 20, over linear growth"},
	{"BenchmarkLongRun", "status_2000_ms", "<=", 1000, "rlpipe status RUN at 2,000 iterations, in ms"},
	{"BenchmarkLongRun", "ui_run_2000_ms", "<=", 1000, "the UI's run page at 2,000 iterations, in ms"},
	{"BenchmarkLongRunLargeTables", "iteration_ratio", "<=", 1.2, "time per iteration of 100,000 trajectories at 200 iterations against 20"},
	{"BenchmarkLongRunLargeTables", "resume_ratio", "<=", 1.2, "resuming a run of 100,000-row iterations at 200 against 20"},
	{"BenchmarkLongRunLargeTables", "store_bytes/iteration_ratio", "<=", 1.2, "store bytes an iteration of 100,000 trajectories adds at 200 against 20"},
	{"BenchmarkLongRunLargeTables", "status_ratio/linear", "<=", 1, "rlpipe status RUN of 100,000-row iterations at 200 against 20, over linear growth"},
	{"BenchmarkLongRunLargeTables", "ui_run_ratio/linear", "<=", 1, "the UI's run page of 100,000-row iterations at 200 against 20, over linear growth"},
}

// figure is one value a benchmark line reported.
type figure struct {
	Bench, Metric string
	Value         float64
}

// benchLine matches "BenchmarkName[/sub]-N  iterations  value unit  value unit …".
var benchLine = regexp.MustCompile(`^(Benchmark[^\s/-]+)(/\S*?)?(-\d+)?\s+\d+\s+(.*)$`)

// parse reads the figures of every benchmark line.
func parse(r io.Reader) ([]figure, error) {
	var out []figure
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		f := strings.Fields(m[4])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			out = append(out, figure{Bench: m[1], Metric: f[i+1], Value: v})
		}
	}
	return out, sc.Err()
}

// verdicts writes a line per target: its last figure, or NOT RUN.
func verdicts(w io.Writer, figs []figure) (met, notMet, notRun int) {
	for _, t := range targets {
		var v float64
		found := false
		for _, f := range figs {
			if f.Bench == t.Bench && f.Metric == t.Metric {
				v, found = f.Value, true
			}
		}
		op := map[string]string{"<=": "≤", ">=": "≥"}[t.Op]
		switch {
		case !found:
			notRun++
			fmt.Fprintf(w, "%-8s %s %s (target %s %g): %s\n", "NOT RUN", t.Bench, t.Metric, op, t.Bound, t.Why)
		case (t.Op == "<=" && v <= t.Bound) || (t.Op == ">=" && v >= t.Bound):
			met++
			fmt.Fprintf(w, "%-8s %s %s %.4g %s %g: %s\n", "MET", t.Bench, t.Metric, v, op, t.Bound, t.Why)
		default:
			notMet++
			fmt.Fprintf(w, "%-8s %s %s %.4g, target %s %g: %s\n", "NOT MET", t.Bench, t.Metric, v, op, t.Bound, t.Why)
		}
	}
	return met, notMet, notRun
}

func main() {
	in := io.Reader(os.Stdin)
	if len(os.Args) > 1 {
		f, err := os.Open(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "verdict:", err)
			os.Exit(1)
		}
		defer f.Close()
		in = f
	}
	figs, err := parse(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "verdict:", err)
		os.Exit(1)
	}
	fmt.Println("\n## Targets")
	met, notMet, notRun := verdicts(os.Stdout, figs)
	fmt.Printf("%d met, %d not met, %d not run\n", met, notMet, notRun)
}
