package judge_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/pipeline"
)

// TestEngineReplaysJudgments runs a judge inside a real pipeline task: a
// retry of the task, and a later run that rescores without the task cache,
// both replay the recorded judgment instead of calling the API.
func TestEngineReplaysJudgments(t *testing.T) {
	ctx := context.Background()
	st, err := local.Create(ctx, filepath.Join(t.TempDir(), "store"), "main", nil)
	if err != nil {
		t.Fatal(err)
	}
	f := startFake(t, says("Correct. Score: 1"))
	j := newJudge(t, testConfig(f), nil)

	var mu sync.Mutex
	var seen []string // attempt: status cached
	task := &pipeline.Task{Name: "reward", Version: "1", Env: "judge", Deterministic: true,
		Outputs: []pipeline.Output{{Name: "scores"}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			res, err := j.Score(ctx, in, tc)
			if err != nil {
				return err
			}
			mu.Lock()
			seen = append(seen, fmt.Sprintf("%d:%s %g cached=%v", tc.Attempt, res.Status, res.Score, res.Cached))
			mu.Unlock()
			if tc.Attempt == 1 {
				return errors.New("the task crashes after the paid call")
			}
			return os.WriteFile(tc.OutputPath("scores"), []byte(fmt.Sprint(res.Score)), 0o644)
		}}
	envs := map[string]pipeline.Settings{"judge": {Retry: pipeline.Retry{Attempts: 2, Backoff: time.Millisecond}}}
	run := func(name string, noCache bool) {
		t.Helper()
		r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: name, Envs: envs, NoCache: noCache,
			Machine: &pipeline.Machine{CPU: 2, MemoryMB: 512}, WorkDir: t.TempDir()})
		if err != nil {
			t.Fatalf("open run %s: %v", name, err)
		}
		defer r.Close()
		if err := r.Iteration(1).Go(ctx, task, pipeline.Call{}).Wait(ctx); err != nil {
			t.Fatalf("run %s: %v", name, err)
		}
	}
	run("first", false)
	run("rescore", true)

	want := "[1:ok 1 cached=false 2:ok 1 cached=true 1:ok 1 cached=true 2:ok 1 cached=true]"
	if fmt.Sprint(seen) != want || f.Calls() != 1 {
		t.Fatalf("task saw %v with %d requests\nwant %s with 1", seen, f.Calls(), want)
	}
	if u := j.Usage(); u.Scores != 4 || u.Cached != 3 || u.Requests != 1 {
		t.Fatalf("usage = %+v, want 4 scores, 3 replays, 1 request", u)
	}
}
