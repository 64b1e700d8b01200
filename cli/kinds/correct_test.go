package kinds_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/environments/arith"
	"github.com/rlpipe/rlpipe/evaluators"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/reports"
	"github.com/rlpipe/rlpipe/rewards"
)

// A spec on which the old two rules disagreed: no component "correct",
// an accuracy component, and a penalty that takes the total of a right
// answer ending in an odd digit to 0 (evaluation counted those wrong, the
// health table right).
const accuracyAndLength = `components:
  - name: accuracy
    expr: 'completion == answer ? 1.0 : 0.0'
  - name: odd
    expr: 'completion.matches("[13579]$") ? -1.0 : 0.0'
`

// TestEvaluationAndHealthAgree evaluates the embedded model on 40
// held-out problems (8 samples each) through the engine, scores the same
// samples into a rewards file with the same spec, and computes their
// health: per problem, evaluation's correct samples and the health
// table's solved-all / solved-none / mixed split must be the same, with
// the default rule and with a declared `correct:` key, which changes
// both.
func TestEvaluationAndHealthAgree(t *testing.T) {
	ctx := context.Background()
	st := artifactstest.NewLocal(t)
	prompts := arith.Rows(arith.HeldOutSet(40))
	artifactstest.PutTable(t, st, "main", "data/heldout.parquet", tables.Prompts, prompts)
	if _, err := st.Commit(ctx, "main", "eval set", nil); err != nil {
		t.Fatal(err)
	}
	m, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]tables.Prompt{}
	for _, p := range prompts {
		byID[p.PromptID] = p
	}
	tests := []struct {
		name        string
		key         string // the spec's correct: key, "" for none
		wantCorrect int    // of 320 samples (seeded)
	}{
		{name: "default rule (total above 0)", wantCorrect: 54},
		{name: "declared correct: accuracy", key: "correct: accuracy\n", wantCorrect: 89},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := rewards.ParseSpec("reward.yaml", []byte(accuracyAndLength+tc.key))
			if err != nil {
				t.Fatal(err)
			}
			prog, err := rewards.Compile(spec)
			if err != nil {
				t.Fatal(err)
			}
			tasks, err := evaluators.NewTasks(evaluators.TaskOptions{Metrics: kinds.Registry().Metrics, Policy: tiny.NewPolicy(m), Identity: m.Version(),
				Sampling: policy.Sampling{N: 8, Temperature: 1, MaxTokens: 5}, Seed: 3, Reward: prog, Ks: []int{1, 8}})
			if err != nil {
				t.Fatal(err)
			}
			run := standintest.Evaluate(t, st, pipeline.RunOptions{Name: "agree" + string(rune('a'+i)), Seed: 1, Envs: map[string]pipeline.Settings{"eval": {}}},
				tasks.Generate, tasks.Score, pipeline.StoreArtifact("main", "data/heldout.parquet"), "heldout")
			samples := artifactstest.ReadTable(t, st, run.Branch(), "evals/000000/heldout/samples.parquet", tables.EvalSamples)

			// The same samples as a loop iteration's trajectories and
			// rewards file, the health table's inputs.
			var trajs []tables.Trajectory
			var rws []tables.Reward
			evalCorrect := map[string]int{}
			perProblem := map[string]int{}
			correct := 0
			for _, s := range samples {
				if s.Status != tables.StatusOK {
					t.Fatalf("sample %+v", s)
				}
				tr := tables.Trajectory{PromptID: s.ProblemID, SampleIndex: s.SampleIndex, Completion: s.Completion, Status: tables.StatusOK}
				rw, err := prog.ScoreSample(ctx, tr, byID[s.ProblemID], nil)
				if err != nil {
					t.Fatal(err)
				}
				trajs, rws = append(trajs, tr), append(rws, rw)
				perProblem[s.ProblemID]++
				if s.Correct {
					evalCorrect[s.ProblemID]++
					correct++
				}
			}
			if correct != tc.wantCorrect {
				t.Errorf("evaluation: %d of %d samples correct, want %d", correct, len(samples), tc.wantCorrect)
			}
			path := filepath.Join(t.TempDir(), "rewards.parquet")
			if err := tables.WriteFile(path, prog.Table(), rws, nil); err != nil {
				t.Fatal(err)
			}
			rws, rule, err := tables.ReadRewardsFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if rule != prog.Correctness() {
				t.Fatalf("the rewards file's rule %v, the spec's %v", rule, prog.Correctness())
			}
			h := reports.ComputeHealth(1, trajs, rws, nil, &reports.HealthOptions{Correct: &rule})
			all, none := 0, 0
			for id, n := range perProblem {
				switch evalCorrect[id] {
				case n:
					all++
				case 0:
					none++
				}
			}
			n := float64(len(perProblem))
			if h.Groups != len(perProblem) || h.FracSolvedAll != float64(all)/n || h.FracSolvedNone != float64(none)/n {
				t.Errorf("health: %d groups, solved all %v, none %v; evaluation: %d problems, %v, %v",
					h.Groups, h.FracSolvedAll, h.FracSolvedNone, len(perProblem), float64(all)/n, float64(none)/n)
			}
			t.Logf("rule %v: %d of 320 correct; solved all %d, none %d of 40", rule, correct, all, none)
		})
	}
}

// TestTaskOrder: the command lists an iteration's calls in loop order,
// the shipped steps where they run.
func TestTaskOrder(t *testing.T) {
	want := []string{"sample", "generate", "reward", "advantages", "train", "health", "eval-generate-start", "eval-start", "eval-generate", "eval"}
	if got := kinds.TaskOrder(); !slices.Equal(got, want) {
		t.Errorf("TaskOrder %v, want %v", got, want)
	}
}
