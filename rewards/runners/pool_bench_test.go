package runners_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/runners"
)

// BenchmarkFunctionWorkers scores batches of 64 rows with a CPU-bound
// function (testdata/fns.py:spin) on a pool of one worker and of two,
// alternately in the same run, and reports each one's rows/s and their
// ratio. Scoring is one batch at a time, so the ratio is the pool's own.
// The machine's free cores bound it: on two shared cores, expect less
// than 2.
func BenchmarkFunctionWorkers(b *testing.B) {
	needSystemPython(b)
	benchWorkers(b, "../python/testdata/fns.py:spin", systemPython, func(i int) (string, string) { return fmt.Sprint(i), "" })
}

// BenchmarkMathVerifyWorkers is BenchmarkFunctionWorkers with math-verify
// from the project venv (rewards/python/testdata/venv_fns.py:math_equal)
// on answers written as LaTeX fractions and decimals.
func BenchmarkMathVerifyWorkers(b *testing.B) {
	py := pyvenv.Python(b, "score with math-verify")
	benchWorkers(b, "../python/testdata/venv_fns.py:math_equal", filepath.Dir(filepath.Dir(py)), func(i int) (string, string) {
		return fmt.Sprintf("so the answer is $\\frac{%d}{4}$", i), fmt.Sprintf("$%g$", float64(i)/4)
	})
}

// benchWorkers times function ref under python with 1 and 2 workers on 64
// rows, row i's completion and answer given by row.
func benchWorkers(b *testing.B, ref, python string, row func(i int) (completion, answer string)) {
	if testing.Short() {
		b.Skip("starts Python workers")
	}
	const rows = 64
	progs := map[int]*rewards.Program{}
	for _, n := range []int{1, 2} {
		s, err := rewards.ParseSpec("spec.yaml", []byte(fmt.Sprintf(`functions:
  - {name: f, function: %q, python: %q, workers: %d}
components:
  - {name: f, expr: functions.f}
`, ref, python, n)))
		if err != nil {
			b.Fatal(err)
		}
		if progs[n], err = runners.Compile(s); err != nil {
			b.Fatal(err)
		}
	}
	trajs := make([]tables.Trajectory, rows)
	prompts := make([]tables.Prompt, rows)
	for i := range trajs {
		c, a := row(i)
		id := fmt.Sprintf("p%02d", i)
		trajs[i] = tables.Trajectory{PromptID: id, GroupID: id, Completion: c, Status: tables.StatusOK}
		prompts[i] = tables.Prompt{PromptID: id, Prompt: "?", Answer: a}
	}
	idx, err := rewards.NewPrompts(prompts)
	if err != nil {
		b.Fatal(err)
	}
	var in bytes.Buffer
	if err := tables.Write(&in, tables.Trajectories, trajs, nil); err != nil {
		b.Fatal(err)
	}
	score := func(p *rewards.Program) time.Duration {
		start := time.Now()
		sum, err := p.ScoreFile(context.Background(), io.Discard, bytes.NewReader(in.Bytes()), int64(in.Len()),
			&rewards.ScoreOptions{Prompts: idx, BatchRows: rows, Concurrency: 1})
		if err != nil {
			b.Fatal(err)
		}
		if sum.Scored != rows {
			b.Fatalf("%d rows scored of %d: %+v", sum.Scored, rows, sum)
		}
		return time.Since(start)
	}
	score(progs[1]) // the second worker starts at its first batch
	score(progs[2])
	var one, two time.Duration
	loops := 0
	for b.Loop() {
		one += score(progs[1])
		two += score(progs[2])
		loops++
	}
	n := float64(loops * rows)
	b.ReportMetric(n/one.Seconds(), "rows/s-1-worker")
	b.ReportMetric(n/two.Seconds(), "rows/s-2-workers")
	b.ReportMetric(one.Seconds()/two.Seconds(), "ratio-2/1")
}
