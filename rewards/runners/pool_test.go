package runners_test

import (
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/rewardstest"
)

// scoreCompletions scores one row per completion with p, in batches of
// batchRows, one batch at a time, the rows of completion "skip" not
// scored (status timeout).
func scoreCompletions(t *testing.T, p *rewards.Program, batchRows int, completions ...string) []tables.Reward {
	t.Helper()
	got, _ := scoreConcurrently(t, p, batchRows, 1, completions...)
	return got
}

// scoreConcurrently is scoreCompletions with concurrency batches at once,
// and the summary.
func scoreConcurrently(t *testing.T, p *rewards.Program, batchRows, concurrency int, completions ...string) ([]tables.Reward, rewards.Summary) {
	t.Helper()
	var trajs []tables.Trajectory
	for i, c := range completions {
		st := tables.StatusOK
		if c == "skip" {
			st = tables.StatusTimeout
		}
		trajs = append(trajs, tables.Trajectory{PromptID: "p", SampleIndex: int32(i), GroupID: "p", Completion: c, Status: st})
	}
	prompts, err := rewards.NewPrompts([]tables.Prompt{{PromptID: "p", Prompt: "2+2?", Answer: "4"}})
	if err != nil {
		t.Fatal(err)
	}
	return rewardstest.ScoreFile(t, p, trajs, &rewards.ScoreOptions{Prompts: prompts, BatchRows: batchRows, Concurrency: concurrency})
}

// splitSpec calls fns.py:batch_size as split, on two workers, and as
// whole, on one, from one pool.
const splitSpec = `functions:
  - {name: split, function: ../python/testdata/fns.py:batch_size, python: /usr/bin/python3, workers: 2}
  - {name: whole, function: ../python/testdata/fns.py:batch_size, python: /usr/bin/python3}
components:
  - {name: split, expr: functions.split}
  - {name: whole, expr: functions.whole}
`

// workers: 2 splits each batch's scored rows into two contiguous chunks,
// one call each, whatever the timing: each row's value is the size of
// its call. The same function without the key sees the whole batch
// (TestPythonFunctionsPerBatch), in the same pool.
func TestFunctionWorkersSplitABatch(t *testing.T) {
	needSystemPython(t)
	p, err := compileSpec(t, splitSpec)
	if err != nil {
		t.Fatal(err)
	}
	got := scoreCompletions(t, p, 4, "4", "4", "4", "skip", "4", "4", "4", "4", "4", "4", "4")
	// Batches of 4 rows: 0-3 (row 3 not scored: chunks of 1 and 2), 4-7
	// (2 and 2), 8-10 (1 and 2).
	wantSplit := []float64{1, 2, 2, -1, 2, 2, 2, 2, 1, 2, 2}
	wantWhole := []float64{3, 3, 3, -1, 4, 4, 4, 4, 3, 3, 3}
	for i, r := range got {
		if wantSplit[i] < 0 {
			if r.Status != "skipped: timeout" {
				t.Errorf("row %d: %+v", i, r)
			}
			continue
		}
		if r.Status != rewards.StatusOK || r.Components["split"] != wantSplit[i] || r.Components["whole"] != wantWhole[i] {
			t.Errorf("row %d: %+v %s, want split %v, whole %v", i, r, deref(r.Error), wantSplit[i], wantWhole[i])
		}
	}
}

// Each chunk runs on a worker of its own; a chunk that kills its worker
// gives its rows status error, the other chunk is scored, and only the
// dead worker restarts: the survivor keeps its process (its token).
func TestFunctionWorkerRestartsAlone(t *testing.T) {
	needSystemPython(t)
	p, err := compileSpec(t, `functions:
  - {name: token, function: ../python/testdata/fns.py:worker_token, python: /usr/bin/python3, workers: 2}
components:
  - {name: token, expr: functions.token}
`)
	if err != nil {
		t.Fatal(err)
	}
	tokens := func(rs []tables.Reward) []float64 {
		out := make([]float64, len(rs))
		for i, r := range rs {
			out[i] = r.Components["token"]
			if r.Status != rewards.StatusOK {
				out[i] = -1
			}
		}
		return out
	}
	first := tokens(scoreCompletions(t, p, 4, "a", "b", "c", "d"))
	if first[0] != first[1] || first[2] != first[3] || first[0] == first[2] || first[0] < 0 || first[2] < 0 {
		t.Fatalf("tokens %v: want rows 0-1 on one worker, 2-3 on another", first)
	}
	dead := scoreCompletions(t, p, 4, "a", "b", "exit", "d")
	const reason = "function token: the worker ended: failed (exit code 3); restarted"
	for i, r := range dead {
		switch {
		case i < 2 && (r.Status != rewards.StatusOK || r.Components["token"] != first[0]):
			t.Errorf("row %d, on the worker that lives: %+v %s, want token %v", i, r, deref(r.Error), first[0])
		case i >= 2 && (r.Status != rewards.StatusError || deref(r.Error) != reason):
			t.Errorf("row %d, on the worker that died: %+v %q, want status error, %q", i, r, deref(r.Error), reason)
		}
	}
	after := tokens(scoreCompletions(t, p, 4, "a", "b", "c", "d"))
	if after[0] != first[0] || after[1] != first[0] || after[2] != after[3] || after[2] == first[2] || after[2] < 0 {
		t.Fatalf("tokens after the restart %v (before %v): want rows 0-1 on the same worker as before, 2-3 on a new one", after, first)
	}
}

// Batches scored at once share the pool: a function of two workers and
// one of one, four batches at a time, never wait on each other for good,
// and each row's value is its chunk's size, as one batch at a time.
func TestFunctionWorkersUnderConcurrentBatches(t *testing.T) {
	needSystemPython(t)
	p, err := compileSpec(t, splitSpec)
	if err != nil {
		t.Fatal(err)
	}
	completions := make([]string, 64)
	for i := range completions {
		completions[i] = "4"
	}
	got, _ := scoreConcurrently(t, p, 4, 4, completions...)
	for i, r := range got {
		if r.Status != rewards.StatusOK || r.Components["split"] != 2 || r.Components["whole"] != 4 {
			t.Errorf("row %d: %+v %s, want split 2, whole 4", i, r, deref(r.Error))
		}
	}
}

// limits: {wall: …} bounds each chunk: a chunk that hangs gives its rows
// status error saying so, the other chunk is scored, and so is the next
// batch.
func TestFunctionHangMarksItsChunk(t *testing.T) {
	needSystemPython(t)
	p, err := compileSpec(t, `functions:
  - {name: hang, function: ../python/testdata/fns.py:hangs_on_hang, python: /usr/bin/python3, workers: 2, limits: {wall: 2s}}
components:
  - {name: hang, expr: functions.hang}
`)
	if err != nil {
		t.Fatal(err)
	}
	const reason = "function hang: the worker ended: timeout (no answer within the wall limit 2s); restarted"
	for i, r := range scoreCompletions(t, p, 8, "a", "b", "hang", "d", "e", "f", "g", "h") {
		switch {
		case i < 4: // the first chunk, rows 0-3, holds the hang
			if r.Status != rewards.StatusError || deref(r.Error) != reason {
				t.Errorf("row %d: %+v %q, want status error, %q", i, r, deref(r.Error), reason)
			}
		case r.Status != rewards.StatusOK || r.Components["hang"] != 1:
			t.Errorf("row %d: %+v %s, want hang 1", i, r, deref(r.Error))
		}
	}
	for i, r := range scoreCompletions(t, p, 8, "a", "b", "c", "d") {
		if r.Status != rewards.StatusOK || r.Components["hang"] != 1 {
			t.Errorf("the next batch, row %d: %+v %s", i, r, deref(r.Error))
		}
	}
}
