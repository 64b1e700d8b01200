package runners_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/tables"
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
	if testing.Short() {
		b.Skip("starts Python workers")
	}
	needSystemPython(b)
	const rows = 64
	progs := map[int]*rewards.Program{}
	for _, n := range []int{1, 2} {
		s, err := rewards.ParseSpec("spec.yaml", []byte(fmt.Sprintf(`functions:
  - {name: spin, function: ../python/testdata/fns.py:spin, python: /usr/bin/python3, workers: %d}
components:
  - {name: spin, expr: functions.spin}
`, n)))
		if err != nil {
			b.Fatal(err)
		}
		if progs[n], err = runners.Compile(s); err != nil {
			b.Fatal(err)
		}
	}
	trajs := make([]tables.Trajectory, rows)
	for i := range trajs {
		trajs[i] = tables.Trajectory{PromptID: "p", SampleIndex: int32(i), GroupID: "p", Completion: fmt.Sprint(i), Status: tables.StatusOK}
	}
	var in bytes.Buffer
	if err := tables.Write(&in, tables.Trajectories, trajs, nil); err != nil {
		b.Fatal(err)
	}
	score := func(p *rewards.Program) time.Duration {
		start := time.Now()
		if _, err := p.ScoreFile(context.Background(), io.Discard, bytes.NewReader(in.Bytes()), int64(in.Len()),
			&rewards.ScoreOptions{BatchRows: rows, Concurrency: 1}); err != nil {
			b.Fatal(err)
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
