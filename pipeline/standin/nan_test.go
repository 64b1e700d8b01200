package standin_test

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

// An iteration whose samples all failed to score (totals NaN) trains on
// nothing: the adapter records mean reward 0 and the next iteration reads
// it, where an unchecked encode error once wrote an empty file that the
// next iteration failed to read.
func TestStandinTrainWithNoScoredSample(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 4)
	rt, err := tables.RewardsWith("correct")
	if err != nil {
		t.Fatal(err)
	}
	rows := []tables.Reward{{PromptID: "p1", Status: "judge error", Total: math.NaN()}, {PromptID: "p1", SampleIndex: 1, Status: "judge error", Total: math.NaN()}}
	rewards := standintest.PutInput(t, st, "data/rewards.parquet", rt, rows)
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "nan", Envs: map[string]pipeline.Settings{"train": {}}, Machine: &pipeline.Machine{CPU: 2, MemoryMB: 512}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	train := standin.Stages(standin.Options{}).Train
	it := r.Iteration(1)
	n := it.Go(ctx, train, pipeline.Call{Inputs: map[string]pipeline.Artifact{"rewards": rewards},
		Params: map[string]int{"iteration": 1}})
	if err := n.Wait(ctx); err != nil {
		t.Fatalf("train: %v", err)
	}
	out, err := n.Result(pipeline.OutAdapter)
	if err != nil {
		t.Fatal(err)
	}
	b := standintest.Read(t, st, out.Ref, out.Path+"/adapter_model.json")
	var a struct {
		Iteration  int     `json:"iteration"`
		MeanReward float64 `json:"mean_reward"`
	}
	if err := json.Unmarshal(b, &a); err != nil || a.Iteration != 1 || a.MeanReward != 0 {
		t.Fatalf("adapter_model.json = %q (%v), want iteration 1 with mean reward 0", b, err)
	}
	// The next iteration reads that adapter as its policy (where the empty
	// file failed with "read policy: unexpected end of JSON input").
	next := r.Iteration(2).Go(ctx, train, pipeline.Call{Inputs: map[string]pipeline.Artifact{
		"rewards": rewards, "policy": n.Output(pipeline.OutAdapter)},
		Params: map[string]int{"iteration": 2}})
	if err := next.Wait(ctx); err != nil {
		t.Fatalf("the next iteration's train: %v", err)
	}
}
