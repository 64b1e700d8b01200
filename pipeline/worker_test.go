package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

// wireExecutor is a remote executor without the network: each job goes
// through JSON, as it would through Temporal, and a Worker runs its
// attempts, one at a time, until one succeeds or the retries run out.
type wireExecutor struct{ w *pipeline.Worker }

func (x wireExecutor) Execute(ctx context.Context, _ *pipeline.Task, job pipeline.Job, report func(pipeline.Event)) (pipeline.Outcome, error) {
	b, err := json.Marshal(job)
	if err != nil {
		return pipeline.Outcome{}, err
	}
	var got pipeline.Job
	if err := json.Unmarshal(b, &got); err != nil {
		return pipeline.Outcome{}, err
	}
	for attempt := 1; ; attempt++ {
		outs, err := x.w.Attempt(ctx, got, attempt)
		if err == nil {
			report(pipeline.Event{Kind: pipeline.EventFinished, Task: job.Call, Iteration: job.Iteration, Attempt: attempt})
			return pipeline.Outcome{Outputs: outs, Attempts: attempt}, nil
		}
		if errors.Is(err, pipeline.ErrPermanent) || attempt >= job.Settings.Retry.Attempts {
			return pipeline.Outcome{Attempts: attempt}, &pipeline.TaskError{Task: job.Call, Group: job.Group, Attempts: attempt, Err: err}
		}
	}
}

// TestWorkerRunsJobsLikeTheLocalExecutor runs the stand-in loop (overlap
// on, a transient failure in every stage) with its attempts run by a
// Worker from jobs that went through JSON, and checks that every artifact
// equals the local executor's: a job carries all a task needs. Every
// input the worker put itself comes from its local copies (the object
// cache), not from the store: the worker reads only the dataset there.
func TestWorkerRunsJobsLikeTheLocalExecutor(t *testing.T) {
	ctx := context.Background()
	mk := func() (artifacts.Store, pipeline.Stages, map[string]pipeline.Settings) {
		st := standintest.NewStore(t, 10)
		stages := standin.Stages(standin.Options{SamplesPerPrompt: 2,
			FailTimes: map[string]int{"sample": 1, "generate": 1, "reward": 1, "train": 1}})
		retry := pipeline.Settings{Retry: pipeline.Retry{Attempts: 2}}
		envs := map[string]pipeline.Settings{"sample": retry, "generate": retry, "reward": retry, "train": retry}
		return st, stages, envs
	}
	cfg := pipeline.LoopConfig{Iterations: 3, BatchSize: 3, MaxStaleness: 1, Dataset: pipeline.StoreArtifact("main", "data/prompts.parquet")}

	ref, stages, envs := mk()
	r := openRun(t, ref, pipeline.RunOptions{Name: "w", Envs: envs, Seed: 3})
	if _, err := r.Loop(ctx, cfg, stages); err != nil {
		t.Fatal(err)
	}
	want := standintest.Sums(t, ref, "runs-w")

	st, stages, envs := mk()
	reads := &missing{Store: st, reads: map[string]int{}} // counts reads, misses none
	w, err := pipeline.NewWorker(reads, pipeline.WorkerOptions{Tasks: stages.Tasks(), Envs: envs, ConfigHashes: []string{"cfg-1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got := strings.Join(w.Tasks(), " "); got != "generate reward sample train" {
		t.Fatalf("worker tasks %q", got)
	}
	r2 := openRun(t, st, pipeline.RunOptions{Name: "w", Envs: envs, Seed: 3, ConfigHash: "cfg-1", Executor: wireExecutor{w}})
	if _, err := r2.Loop(ctx, cfg, stages); err != nil {
		t.Fatal(err)
	}
	got := standintest.Sums(t, st, "runs-w")
	if len(want) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("artifacts through the worker differ from the local executor's:\n got %v\nwant %v", got, want)
	}
	var fromStore []string
	for p := range reads.reads {
		if strings.Contains(p, "iterations/") {
			fromStore = append(fromStore, p)
		}
	}
	if len(fromStore) > 0 || reads.readsOf("prompts.parquet") == 0 {
		t.Fatalf("the worker read %v from the store: want only the dataset, its own outputs come from its object cache", fromStore)
	}
}

// TestWorkerRejectsTwoTasksOfOneName checks the registry: a worker must
// know which task a job names.
func TestWorkerRejectsTwoTasksOfOneName(t *testing.T) {
	a := &pipeline.Task{Name: "gen", Run: func(context.Context, *pipeline.TaskContext) error { return nil }}
	b := &pipeline.Task{Name: "gen", Run: func(context.Context, *pipeline.TaskContext) error { return nil }}
	_, err := pipeline.NewWorker(standintest.NewStore(t, 0), pipeline.WorkerOptions{Tasks: []*pipeline.Task{a, b}})
	if !errors.Is(err, pipeline.ErrConfig) || !strings.Contains(err.Error(), "two tasks are named gen") {
		t.Fatalf("err = %v", err)
	}
}
