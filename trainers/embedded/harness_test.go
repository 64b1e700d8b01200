package embedded_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments/datasets"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/rollouts/rolloutstest"
)

const datasetPath = "data/arith.parquet"

// arithPrompts returns n training problems (outside the held-out split)
// drawn with a fixed seed, as a prompts table's rows.
func arithPrompts(n int) []tables.Prompt {
	rng := rand.New(rand.NewPCG(7, 7))
	rows := make([]tables.Prompt, n)
	for i := range rows {
		p := tiny.TrainingProblem(rng)
		rows[i] = tables.Prompt{PromptID: fmt.Sprintf("a%05d", i), Prompt: p.Prompt(), Answer: p.Answer(),
			Metadata: "{}", Source: "tiny-arith-train", Split: "train"}
	}
	return rows
}

// newStore creates a local store whose main branch holds n arithmetic
// prompts at datasetPath.
func newStore(t testing.TB, n int) artifacts.Store {
	t.Helper()
	st := standintest.NewStore(t, 0)
	if _, err := datasets.Put(context.Background(), st, "main", datasetPath, arithPrompts(n), &datasets.PutOptions{Message: "arithmetic prompts"}); err != nil {
		t.Fatal(err)
	}
	return st
}

// rewardTask scores 1 when a completion is exactly the prompt's answer and
// the sample stopped by itself, 0 otherwise; a failed trajectory gets its
// status and no reward.
func rewardTask() *pipeline.Task {
	return &pipeline.Task{Name: "reward", Version: "exact-answer-1", Env: "reward", Deterministic: true,
		Outputs: []pipeline.Output{{Name: pipeline.OutRewards, File: "rewards.parquet"}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			prompts, err := tables.ReadFile(tc.InputPath("prompts"), tables.Prompts)
			if err != nil {
				return pipeline.Permanent(err)
			}
			trajs, err := tables.ReadFile(tc.InputPath("trajectories"), tables.Trajectories)
			if err != nil {
				return pipeline.Permanent(err)
			}
			answers := map[string]string{}
			for _, p := range prompts {
				answers[p.PromptID] = p.Answer
			}
			rt, err := tables.RewardsWith("correct")
			if err != nil {
				return err
			}
			rows := make([]tables.Reward, len(trajs))
			for i, tr := range trajs {
				r := tables.Reward{PromptID: tr.PromptID, SampleIndex: tr.SampleIndex, SpecDigest: "exact-answer-1",
					VerifierOutputs: "{}", JudgeOutputs: "{}", Status: tables.StatusOK}
				if tr.Status != tables.StatusOK {
					r.Status, r.Error = tr.Status, tr.Error
				} else {
					v := 0.0
					if tr.FinishReason == policy.FinishStop && tr.Completion == answers[tr.PromptID] {
						v = 1
					}
					r.Total, r.Components = v, map[string]float64{"correct": v}
				}
				rows[i] = r
			}
			f, err := os.Create(tc.OutputPath(pipeline.OutRewards))
			if err != nil {
				return err
			}
			if err := tables.Write(f, rt, rows, nil); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		}}
}

// stages are the loop's stages around a train task: the stand-in sampler,
// the real rollout stage sampling the embedded model (8 samples, T 1, at
// most 5 tokens, with logprobs) and the exact-answer reward.
func stages(t testing.TB, m *tiny.Model, train *pipeline.Task) pipeline.Stages {
	t.Helper()
	s := standin.Stages(standin.Options{})
	return pipeline.Stages{Sample: s.Sample, Generate: rolloutstest.EmbeddedGenerate(t, m, 8), Reward: rewardTask(), Train: train}
}

// openRun opens a run whose every stage retries up to 3 attempts at once.
func openRun(t testing.TB, st artifacts.Store, name string, seed uint64) *pipeline.Run {
	t.Helper()
	quick := pipeline.Settings{Retry: pipeline.Retry{Attempts: 3, Backoff: time.Millisecond}}
	r, err := pipeline.Open(context.Background(), st, pipeline.RunOptions{Name: name, Seed: seed, WorkDir: t.TempDir(),
		Envs: map[string]pipeline.Settings{"sample": quick, "generate": quick, "reward": quick, "advantages": quick, "train": quick}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func loopConfig(iterations, batch int) pipeline.LoopConfig {
	return pipeline.LoopConfig{Iterations: iterations, BatchSize: batch, Dataset: pipeline.StoreArtifact("main", datasetPath)}
}
