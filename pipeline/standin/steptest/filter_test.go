package steptest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/driver"
	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/pipeline/standin/steptest"
)

// filterStep is a step of this test alone, all of it in this function:
// between reward and train, it copies the iteration's rewards with a
// positive total to filtered.parquet, which nothing reads. It is what
// adding a step costs: this value, and one line that adds it.
func filterStep() pipeline.Step {
	return pipeline.Step{Name: "filter", After: pipeline.SlotReward,
		Inputs:  []pipeline.StepInput{pipeline.From(pipeline.SlotReward, pipeline.OutRewards)},
		Outputs: []string{"filtered"},
		Task: &pipeline.Task{Name: "filter", Version: "filter-1", Env: "filter", Deterministic: true,
			Outputs: []pipeline.Output{{Name: "filtered", File: "filtered.parquet"}},
			Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
				rows, err := pipeline.ReadInput(tc, pipeline.OutRewards, tables.Rewards)
				if err != nil {
					return err
				}
				kept := slices.DeleteFunc(rows, func(r tables.Reward) bool { return r.Total <= 0 })
				return tables.WriteFile(tc.OutputPath("filtered"), tables.Rewards, kept, nil)
			}}}
}

func TestFilterStepConformance(t *testing.T) {
	steptest.Run(t, func(testing.TB) pipeline.Step { return filterStep() })
}

// TestAStepIsOneRegistrationLine: a registry with the filter step's one
// line runs it in every iteration of a pipeline file's loop, between
// reward and train, through the generic wiring: its file holds the
// rewards with a positive total, and the train task's inputs do not name
// it (nothing reads it).
func TestAStepIsOneRegistrationLine(t *testing.T) {
	ctx := context.Background()
	reg := kinds.Registry()
	reg.Steps = append(reg.Steps, func(kind.StepBuild) ([]pipeline.Step, error) { return []pipeline.Step{filterStep()}, nil })

	src := `{run: filter, seed: 3, iterations: 2, batch_size: 3, dataset: "main:data/prompts.parquet",
  stages: {sample: {kind: standin}, generate: {kind: standin, samples_per_prompt: 2}, reward: {kind: standin}, train: {kind: standin}}}
`
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "pipeline.yaml"), []byte(src), reg)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := cfg.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	plan.Close()
	if got := pipeline.TaskOrder(plan.Stages.Steps); !slices.Equal(got, []string{"sample", "generate", "reward", "filter", "train", "health"}) {
		t.Fatalf("task order %v, want the filter step between reward and train", got)
	}
	if _, ok := plan.Run.Envs["filter"]; !ok {
		t.Errorf("the plan did not define the step's environment: %v", plan.Run.Envs)
	}

	st := steptest.Store(t)
	sum, err := driver.Run(ctx, st, cfg, driver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 2; n++ {
		rewards := steptest.ReadTable(t, st, sum.Branch, runs.IterationPath(n, runs.RewardsFile), tables.Rewards)
		filtered := steptest.ReadTable(t, st, sum.Branch, runs.IterationPath(n, "filtered.parquet"), tables.Rewards)
		var want []string
		for _, r := range rewards {
			if r.Total > 0 {
				want = append(want, fmt.Sprintf("%s/%d", r.PromptID, r.SampleIndex))
			}
		}
		var got []string
		for _, r := range filtered {
			got = append(got, fmt.Sprintf("%s/%d", r.PromptID, r.SampleIndex))
		}
		if len(rewards) != 6 || len(want) == 0 || len(want) == len(rewards) || !slices.Equal(got, want) {
			t.Errorf("iteration %d: filtered %v of %d rewards, want %v", n, got, len(rewards), want)
		}
		m, err := runs.ReadMetrics(ctx, st, sum.Branch, n)
		if err != nil || m == nil {
			t.Fatalf("iteration %d: metrics %v", n, err)
		}
		if _, ok := m.Tasks["filter"]; !ok {
			t.Errorf("iteration %d: task metrics %v have no filter call", n, m.Tasks)
		}
		_, info, err := st.GetObject(ctx, sum.Branch, runs.IterationPath(n, runs.TrainMetricsFile))
		if err != nil {
			t.Fatal(err)
		}
		if in := info.Metadata["rlpipe-inputs"]; in == "" || strings.Contains(in, "filtered") {
			t.Errorf("iteration %d: the train task's inputs %s name the filter step's output", n, in)
		}
	}
}
