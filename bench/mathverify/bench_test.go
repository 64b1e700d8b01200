package mathverify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/internal/benchstat"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/python"
	"github.com/rlpipe/rlpipe/rewards/rewardstest"
)

const (
	// benchRows is how many rows each way scores.
	benchRows = 320
	// perRowRows is how many of them the per-row verifier scores: two
	// sandboxes and an import of math-verify a row, 16 rows at once.
	perRowRows = 16
	// rounds alternate which way goes first; each way's figure is its
	// median over the rounds (and its best, for the _best ratio: on
	// shared cores the same pass varies 2× between runs).
	rounds = 5
)

// row is one scored sample: the completion and its reference answer.
type row struct{ completion, answer string }

// benchSet is the fixed set of rows: eight kinds, plain and LaTeX, right
// and wrong, with numbers from a fixed seed.
func benchSet(n int) []row {
	rng := rand.New(rand.NewPCG(37, 5))
	out := make([]row, 0, n)
	for i := 0; len(out) < n; i++ {
		a, b := rng.IntN(900)+10, rng.IntN(90)+2
		s := strconv.Itoa(a + b)
		var r row
		switch i % 8 {
		case 0: // GSM8K's format, right
			r = row{fmt.Sprintf("%d plus %d is %s.\n#### %s", a, b, s, s), s}
		case 1: // a sentence, wrong
			r = row{fmt.Sprintf("The answer is %d apples.", a+b+1), s}
		case 2: // an equivalent fraction in \boxed{}, right
			r = row{fmt.Sprintf(`So the answer is $\boxed{\frac{%d}{%d}}$.`, 2*a, 2*b), fmt.Sprintf(`\frac{%d}{%d}`, a, b)}
		case 3: // a decimal reference, a fraction answer, right
			r = row{fmt.Sprintf(`$\frac{%d}{4}$`, a), strconv.FormatFloat(float64(a)/4, 'f', -1, 64)}
		case 4: // a square root, right
			r = row{fmt.Sprintf(`The result is $\sqrt{%d}$`, b*b+1), fmt.Sprintf(`\sqrt{%d}`, b*b+1)}
		case 5: // nothing to parse
			r = row{"I cannot tell.", s}
		case 6: // a multiple of pi in \boxed{}, wrong
			r = row{fmt.Sprintf(`\boxed{%d\pi}`, b+1), fmt.Sprintf(`%d\pi`, b)}
		case 7: // the bare number, right
			r = row{s, s}
		}
		out = append(out, r)
	}
	return out
}

// batch is rows as the reward function's keyword arguments.
type batch struct {
	Completions []string `json:"completions"`
	Prompts     []string `json:"prompts"`
	Answer      []string `json:"answer"`
}

func asBatch(rows []row) batch {
	var b batch
	for i, r := range rows {
		b.Completions = append(b.Completions, r.completion)
		b.Prompts = append(b.Prompts, "question "+strconv.Itoa(i))
		b.Answer = append(b.Answer, r.answer)
	}
	return b
}

// rewardDir is the shipped reward function's directory.
func rewardDir(b *testing.B) string {
	dir, err := filepath.Abs("../../examples/gsm8k-math-verify/rewards")
	if err != nil {
		b.Fatal(err)
	}
	return dir
}

// warmup is one row outside the set, scored first by each way, untimed.
var warmup = []row{{`\boxed{7}`, "7"}}

func BenchmarkMathVerify(b *testing.B) {
	py := pyvenv.Python(b, "benchmark math-verify through the Python worker")
	venv := filepath.Dir(filepath.Dir(py))
	_, err := python.Find(context.Background(), venv)
	if errors.Is(err, python.ErrUnreachable) {
		b.Skipf("the sandbox cannot run the project venv: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	rows := benchSet(benchRows)
	dir := rewardDir(b)
	for range b.N {
		var worker, floor []float64
		var want []*float64
		var start time.Duration
		for r := range rounds {
			workerWay := func() {
				s, sc, st := workerRun(b, venv, dir, rows)
				worker, start = append(worker, s), st
				same(b, "the worker", sc, want)
			}
			floorWay := func() {
				s, sc := floorRun(b, py, dir, rows)
				floor = append(floor, s)
				if want == nil {
					want = sc // the reference the other ways are checked against
				}
				same(b, "the floor", sc, want)
			}
			ways := []func(){floorWay, workerWay}
			if r%2 == 1 {
				ways = []func(){workerWay, floorWay}
			}
			for _, w := range ways {
				w()
			}
		}
		overhead := overheadRun(b, venv, rows)
		perRow, sc := perRowRun(b, venv, dir, rows[:perRowRows])
		same(b, "one sandbox per row", sc, want[:perRowRows])
		right := 0
		for _, s := range want {
			if s != nil && *s == 1 {
				right++
			}
		}
		w, f := float64(benchRows)/benchstat.Median(worker), float64(benchRows)/benchstat.Median(floor)
		p := float64(perRowRows) / perRow
		b.ReportMetric(w, "worker_rows/s")
		b.ReportMetric(f, "floor_rows/s")
		b.ReportMetric(p, "per_row_rows/s")
		b.ReportMetric(w/f, "worker/floor")
		b.ReportMetric(slices.Min(floor)/slices.Min(worker), "worker/floor_best")
		b.ReportMetric(w/p, "worker/per_row")
		b.ReportMetric(start.Seconds(), "worker_start_s")
		b.ReportMetric(overhead*1e3, "path_ms/batch")
		b.ReportMetric(float64(right), "right_rows")
		b.Logf("%d rows (%d right): worker %.4fs, floor %.4fs (medians of %d: %v, %v); per row %.2fs for %d rows; worker start %v; the path alone %.1f ms a batch",
			benchRows, right, benchstat.Median(worker), benchstat.Median(floor), rounds, worker, floor, perRow, perRowRows, start.Round(time.Millisecond), overhead*1e3)
	}
}

// same fails b unless got are want's scores (nil: not scored).
func same(b *testing.B, who string, got, want []*float64) {
	b.Helper()
	if want == nil {
		return
	}
	if len(got) != len(want) {
		b.Fatalf("%s gave %d scores, want %d", who, len(got), len(want))
	}
	for i := range got {
		if (got[i] == nil) != (want[i] == nil) || got[i] != nil && *got[i] != *want[i] {
			b.Fatalf("%s: row %d scored %v, the floor %v", who, i, fmtScore(got[i]), fmtScore(want[i]))
		}
	}
}

func fmtScore(s *float64) string {
	if s == nil {
		return "None"
	}
	return strconv.FormatFloat(*s, 'g', -1, 64)
}

// workerRun compiles a spec whose one function is the shipped reward,
// which starts the worker and imports math-verify (start), scores the
// warm-up row, then times ScoreFile on rows: seconds and scores.
func workerRun(b *testing.B, venv, dir string, rows []row) (float64, []*float64, time.Duration) {
	t0 := time.Now()
	p := rewardstest.Program(b, filepath.Join(b.TempDir(), "spec.yaml"), functionSpec(filepath.Join(dir, "math_verify_reward.py")+":accuracy", venv))
	start := time.Since(t0)
	score(b, p, warmup)
	t1 := time.Now()
	out := score(b, p, rows)
	return time.Since(t1).Seconds(), out, start
}

// functionSpec is a spec whose one component, correct, is the function
// ref run by the venv's interpreter.
func functionSpec(ref, venv string) string {
	return fmt.Sprintf("functions:\n  - {name: accuracy, function: %q, python: %q}\ncomponents:\n  - {name: correct, expr: functions.accuracy}\n", ref, venv)
}

// overheadRun is the worker's path with a function that does no work
// (testdata/noop.py) on rows: the median seconds of five batches, what
// the path costs over the function's own time.
func overheadRun(b *testing.B, venv string, rows []row) float64 {
	ref, err := filepath.Abs("testdata/noop.py")
	if err != nil {
		b.Fatal(err)
	}
	p := rewardstest.Program(b, filepath.Join(b.TempDir(), "spec.yaml"), functionSpec(ref+":zeros", venv))
	score(b, p, warmup)
	var s []float64
	for range 5 {
		t0 := time.Now()
		score(b, p, rows)
		s = append(s, time.Since(t0).Seconds())
	}
	return benchstat.Median(s)
}

// score scores rows with p in one batch, the function's component of
// each row (nil when not scored).
func score(b *testing.B, p *rewards.Program, rows []row) []*float64 {
	var trajs []tables.Trajectory
	var prompts []tables.Prompt
	for i, r := range rows {
		id := "p" + strconv.Itoa(i)
		trajs = append(trajs, tables.Trajectory{PromptID: id, GroupID: id, Completion: r.completion, Status: tables.StatusOK})
		prompts = append(prompts, tables.Prompt{PromptID: id, Prompt: "question " + strconv.Itoa(i), Answer: r.answer})
	}
	got := rewardstest.ScoreRows(b, p, trajs, prompts)
	scores := make([]*float64, len(got))
	for i, r := range got {
		if r.Status == rewards.StatusOK {
			v := r.Components["correct"]
			scores[i] = &v
		}
	}
	return scores
}

// floorRun scores rows with the reward function in a plain Python loop
// (testdata/floor.py): the loop's seconds, and the scores.
func floorRun(b *testing.B, py, dir string, rows []row) (float64, []*float64) {
	req, err := json.Marshal(map[string]batch{"warmup": asBatch(warmup), "rows": asBatch(rows)})
	if err != nil {
		b.Fatal(err)
	}
	var a struct {
		Seconds float64    `json:"seconds"`
		Scores  []*float64 `json:"scores"`
	}
	if err := json.Unmarshal(pyvenv.Run(b, "testdata/floor.py", req, py, "testdata/floor.py", dir), &a); err != nil {
		b.Fatal(err)
	}
	return a.Seconds, a.Scores
}

// perRowRun scores rows through today's per-row path: a verifier with
// the venv as its python:, whose checker (testdata/verifier_check.py)
// imports the shipped function and scores the completion its candidate
// run printed — two sandboxes a row, math-verify imported in one — with
// the loop's defaults (16 rows at once). The seconds, and the scores.
func perRowRun(b *testing.B, venv, dir string, rows []row) (float64, []*float64) {
	check, err := os.ReadFile("testdata/verifier_check.py")
	if err != nil {
		b.Fatal(err)
	}
	fn, err := os.ReadFile(filepath.Join(dir, "math_verify_reward.py"))
	if err != nil {
		b.Fatal(err)
	}
	// YAML reads JSON: the files' text needs no quoting by hand.
	spec, err := json.Marshal(map[string]any{
		"verifiers": []any{map[string]any{
			"name": "mv", "python": venv,
			"files":   map[string]string{"completion.txt": "{{.Completion}}"},
			"command": []string{"cat", "completion.txt"},
			"check": map[string]any{
				"command": []string{"python3", "/check/score.py"},
				"files":   map[string]string{"score.py": string(check), "math_verify_reward.py": string(fn), "answer.txt": "{{.Answer}}"},
			},
			"limits": map[string]any{"wall": "5m", "memory_mb": 2048},
		}},
		"components": []any{map[string]any{"name": "correct", "expr": "double(verifiers.mv.reason)"}},
	})
	if err != nil {
		b.Fatal(err)
	}
	p := rewardstest.Program(b, filepath.Join(b.TempDir(), "spec.yaml"), string(spec))
	t0 := time.Now()
	scores := score(b, p, rows)
	return time.Since(t0).Seconds(), scores
}
