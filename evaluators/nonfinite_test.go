package evaluators_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/evaluators"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy"
)

// TestEvalNonfiniteRewards scores two problems × two samples whose
// rewards are NaN or infinite. A set whose every reward is not finite
// fails the eval task at once, saying so and naming a sample, where it
// once failed with "avg@k: k=1 but only n=0 samples per problem"; a
// problem whose samples all are says which samples were left out and
// why; a set with some finite rewards is summarised over those.
func TestEvalNonfiniteRewards(t *testing.T) {
	const next = "make every component and the total finite on every row, e.g. guard divisions and logarithms in the reward spec, and check the scores of its judges"
	tests := []struct {
		name, expr string
		want       string // the task's error, "" for none
		avg        float64
	}{
		{name: "every reward NaN", expr: `0.0 / (double(sample_index) * 0.0)`,
			want: "evaluate base on heldout: no sample has a finite reward (4 of 4 are NaN or infinite; the first, prompt q0 sample 0: component correct: the value is NaN): " + next},
		{name: "every reward +Inf", expr: `1.0 / (double(sample_index) * 0.0)`,
			want: "evaluate base on heldout: no sample has a finite reward (4 of 4 are NaN or infinite; the first, prompt q0 sample 0: component correct: the value is +Inf): " + next},
		{name: "one problem's rewards all +Inf", expr: `prompt_id == "q1" ? 1.0 / 0.0 : 1.0`,
			want: "evaluate base on heldout: problem q1: avg@k: k=1 but only n=0 samples per problem: k exceeds the samples per problem (sample at least k, ideally 2k); 2 of its 2 samples were left out: 2 reward_nonfinite"},
		{name: "sample 0 +Inf", expr: `sample_index == 0 ? 1.0 / double(sample_index) : 1.0`, avg: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prog := rewardProgram(t, "components:\n  - name: correct\n    expr: '"+tt.expr+"'\n")
			ks := []int{1}
			tasks, err := evaluators.NewTasks(evaluators.TaskOptions{Metrics: kinds.Registry().Metrics, Reward: prog, Sampling: policy.Sampling{N: 2}, Ks: ks})
			if err != nil {
				t.Fatal(err)
			}
			summary, err := evalScore(t, tasks.Score)
			var te *pipeline.TaskError
			switch {
			case tt.want != "":
				if !errors.As(err, &te) || te.Attempts != 1 || te.Err.Error() != tt.want {
					t.Fatalf("eval = %v\nwant the task to fail on its first attempt with %s", err, tt.want)
				}
			case err != nil:
				t.Fatal(err)
			default:
				for _, r := range summary {
					if r.Metric == tables.MetricAvgAtK && (r.Value != tt.avg || r.N != 1) {
						t.Errorf("avg@%d = %v over n=%d, want %v over the one finite sample", r.K, r.Value, r.N, tt.avg)
					}
				}
			}
		})
	}
}

// evalScore runs the eval score task on problems q0 and q1 with two ok
// samples each, retrying up to three times, and returns its summary.
func evalScore(t *testing.T, score *pipeline.Task) ([]tables.EvalSummaryRow, error) {
	t.Helper()
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	putTable(t, st, "data/heldout.parquet", tables.Prompts, []tables.Prompt{{PromptID: "q0", Prompt: "1+1=", Answer: "2"}, {PromptID: "q1", Prompt: "2+2=", Answer: "4"}})
	var trajs []tables.Trajectory
	for _, id := range []string{"q0", "q1"} {
		for i := range 2 {
			trajs = append(trajs, tables.Trajectory{PromptID: id, SampleIndex: int32(i), Completion: "2", FinishReason: "stop", Status: tables.StatusOK})
		}
	}
	putTable(t, st, "data/generations.parquet", tables.Trajectories, trajs)
	if _, err := st.Commit(ctx, "main", "eval inputs", nil); err != nil {
		t.Fatal(err)
	}
	run, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "ev",
		Envs: map[string]pipeline.Settings{"eval": {Retry: pipeline.Retry{Attempts: 3}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	n := run.Iteration(1).Go(ctx, score, pipeline.Call{Params: map[string]int{"checkpoint": 0}, Inputs: map[string]pipeline.Artifact{
		"prompts": pipeline.StoreArtifact("main", "data/heldout.parquet"), "trajectories": pipeline.StoreArtifact("main", "data/generations.parquet")}})
	if err := n.Wait(ctx); err != nil {
		return nil, err
	}
	out, err := n.Result(evaluators.OutSummary)
	if err != nil {
		t.Fatal(err)
	}
	return standintest.ReadRows(t, st, out.Ref, out.Path, tables.EvalSummary), nil
}

func putTable[T any](t *testing.T, st artifacts.Store, path string, tb *tables.Table[T], rows []T) {
	t.Helper()
	var b bytes.Buffer
	if err := tables.Write(&b, tb, rows, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutObject(context.Background(), "main", path, &b, nil); err != nil {
		t.Fatal(err)
	}
}
