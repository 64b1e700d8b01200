package evaluators_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/environments/arith"
	"github.com/rlpipe/rlpipe/evaluators"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/pipeline/standin/steptest"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/rewards"
)

const arithSpec = `components:
  - name: correct
    expr: 'completion == answer ? 1.0 : 0.0'
    weight: 1.0
`

func arithReward(t testing.TB) *rewards.Program { return rewardProgram(t, arithSpec) }

// rewardProgram compiles the reward spec text as reward.yaml.
func rewardProgram(t testing.TB, text string) *rewards.Program {
	t.Helper()
	spec, err := rewards.ParseSpec("reward.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	p, err := rewards.Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEvalTaskOnEmbeddedModel evaluates the shipped model on 40 held-out
// problems with 8 samples each, through the engine, and checks the
// summary against the samples it wrote and the exact pass@1 against the
// model's own computation.
func TestEvalTaskOnEmbeddedModel(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	putTable(t, st, "data/heldout.parquet", tables.Prompts, arith.Rows(arith.HeldOutSet(40)))
	if _, err := st.Commit(ctx, "main", "eval set", nil); err != nil {
		t.Fatal(err)
	}
	m, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := evaluators.NewTasks(evaluators.TaskOptions{Metrics: kinds.Registry().Metrics, Policy: tiny.NewPolicy(m), Identity: m.Version(),
		Sampling: policy.Sampling{N: 8, Temperature: 1, MaxTokens: 5}, Seed: 3, Reward: arithReward(t),
		Ks: []int{1, 4, 8}, Exact: m.ExactPass})
	if err != nil {
		t.Fatal(err)
	}
	run := standintest.Evaluate(t, st, pipeline.RunOptions{Name: "ev", Seed: 1, Envs: map[string]pipeline.Settings{"eval": {}}},
		tasks.Generate, tasks.Score, pipeline.StoreArtifact("main", "data/heldout.parquet"), "heldout")
	samples := standintest.ReadRows(t, st, run.Branch(), "evals/000000/heldout/samples.parquet", tables.EvalSamples)
	summary := standintest.ReadRows(t, st, run.Branch(), "evals/000000/heldout/summary.parquet", tables.EvalSummary)
	if len(samples) != 320 {
		t.Fatalf("%d samples, want 40 × 8", len(samples))
	}
	correct := 0
	for _, s := range samples {
		if s.Checkpoint != "base" || s.Status != tables.StatusOK {
			t.Fatalf("sample %+v", s)
		}
		if s.Correct {
			correct++
		}
	}
	if correct != 89 {
		t.Errorf("%d of 320 samples correct, want 89 (seeded)", correct)
	}
	got := map[string]float64{}
	for _, r := range summary {
		got[r.Metric+"@"+string(rune('0'+r.K))] = r.Value
	}
	// pass@1 is the fraction of correct samples (every problem has n = 8).
	if p1 := got["pass@k@1"]; math.Abs(p1-float64(correct)/320) > 1e-12 {
		t.Errorf("pass@1 %v, want %d/320", p1, correct)
	}
	if !(got["pass@k@1"] <= got["pass@k@4"] && got["pass@k@4"] <= got["pass@k@8"]) {
		t.Errorf("pass@k not increasing in k: %v", got)
	}
	probs := arith.HeldOutSet(40)
	var tp []tiny.Problem
	for _, p := range probs {
		tp = append(tp, tiny.Problem{A: p.A, B: p.B})
	}
	want, err := m.ExpectedPass1(ctx, nil, tp)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got[evaluators.MetricExact+"@1"]-want) > 1e-9 {
		t.Errorf("exact pass@1 %v, model says %v", got[evaluators.MetricExact+"@1"], want)
	}
	t.Logf("base on 40 held-out problems: sampled pass@1 %.4f pass@8 %.4f exact %.4f", got["pass@k@1"], got["pass@k@8"], want)
}

func TestEvalTaskRejectsKAboveN(t *testing.T) {
	m, _ := tiny.Embedded()
	_, err := evaluators.NewTasks(evaluators.TaskOptions{Metrics: kinds.Registry().Metrics, Policy: tiny.NewPolicy(m), Reward: arithReward(t),
		Sampling: policy.Sampling{N: 4}, Ks: []int{1, 8}})
	if !errors.Is(err, evaluators.ErrKTooLarge) || !strings.Contains(err.Error(), "k=8 but only n=4") {
		t.Fatalf("err = %v", err)
	}
}

// Sampling JSON cannot hold fails NewTasks, naming the task version it
// was being encoded for, rather than hashing an empty encoding.
func TestEvalTaskRejectsNaNSampling(t *testing.T) {
	m, _ := tiny.Embedded()
	_, err := evaluators.NewTasks(evaluators.TaskOptions{Metrics: kinds.Registry().Metrics, Policy: tiny.NewPolicy(m), Reward: arithReward(t),
		Sampling: policy.Sampling{TopP: math.NaN()}})
	if want := "evaluation: version of the generate task (identity, sampling, seed): json: unsupported value: NaN"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

// TestEvalStepsConformance: the evaluation of the starting policy passes
// the shared step suite: eval-start after eval-generate-start, in the
// first iteration only, on the base model.
func TestEvalStepsConformance(t *testing.T) {
	m, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	steps := func(t testing.TB) []pipeline.Step {
		tasks, err := evaluators.NewTasks(evaluators.TaskOptions{Metrics: kinds.Registry().Metrics, Policy: tiny.NewPolicy(m), Identity: m.Version(),
			Sampling: policy.Sampling{N: 2, Temperature: 1, MaxTokens: 5}, Seed: 3, Reward: arithReward(t), Ks: []int{1, 2}})
		if err != nil {
			t.Fatal(err)
		}
		return pipeline.EvalSteps(pipeline.EvalConfig{Every: 1, Set: pipeline.StoreArtifact("main", steptest.Dataset)}, tasks.Generate, tasks.Score)
	}
	steptest.Run(t, func(t testing.TB) pipeline.Step { return steps(t)[1] }, steps(t)[0])
}
