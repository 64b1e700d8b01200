package rollouts_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/embedded"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/rollouts"
)

// sftTrain is a small real train stage for the embedded model: one LoRA
// step of supervised training on the iteration's prompts' answers,
// starting from the previous adapter, saved as a PEFT directory. It lets
// the loop hand the rollout stage real adapters to load.
func sftTrain(m *tiny.Model) *pipeline.Task {
	return &pipeline.Task{Name: "train", Version: "sft-test", Env: "train", Deterministic: true,
		Outputs: []pipeline.Output{{Name: pipeline.OutAdapter, File: "adapter", Dir: true}, {Name: pipeline.OutMetrics, File: "train_metrics.json"}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			var a *tiny.Adapter
			var err error
			if dir := tc.InputPath("policy"); dir != "" {
				a, err = m.LoadAdapter(dir)
			} else {
				a, err = m.NewAdapter(tiny.LoRAConfig{Seed: 1})
			}
			if err != nil {
				return pipeline.Permanent(err)
			}
			tr, err := tiny.NewTrainer(m, a, tiny.TrainConfig{LR: 0.01})
			if err != nil {
				return err
			}
			ex, err := m.Example(tiny.Problem{A: 12, B: 30 + tc.Iteration})
			if err != nil {
				return err
			}
			st, err := tr.Step(ctx, []tiny.Example{ex}, tiny.NLL)
			if err != nil {
				return err
			}
			if err := a.Save(tc.OutputPath(pipeline.OutAdapter)); err != nil {
				return err
			}
			b, _ := json.Marshal(st)
			return os.WriteFile(tc.OutputPath(pipeline.OutMetrics), b, 0o644)
		}}
}

// embeddedRun runs three on-policy iterations whose generate stage samples
// the embedded model, served as serve says, and returns the trajectories
// tables' checksums and the rows of iteration 3.
func embeddedRun(t *testing.T, serve string) (map[string]string, []tables.Trajectory) {
	t.Helper()
	ctx := context.Background()
	st := standintest.NewStore(t, 6)
	opened, err := embedded.Backend.Open(ctx, policy.Spec{Kind: embedded.Kind, Options: &embedded.PolicyOptions{Serve: serve}})
	if err != nil {
		t.Fatal(err)
	}
	defer opened.Close()
	if serve == embedded.ServeHTTP && !strings.HasPrefix(opened.Addr, "127.0.0.1:") {
		t.Fatalf("served on %q, want loopback", opened.Addr)
	}
	gen, err := rollouts.Task(rollouts.Options{Policy: opened.Policy, Identity: opened.Identity,
		Sampling: policy.Sampling{N: 4, Temperature: 1, MaxTokens: 5, Logprobs: true}})
	if err != nil {
		t.Fatal(err)
	}
	stages := standin.Stages(standin.Options{})
	stages.Generate = gen
	m, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	stages.Train = sftTrain(m)
	quick := pipeline.Settings{Retry: pipeline.Retry{Attempts: 2, Backoff: time.Millisecond}}
	standintest.Loop(t, st, pipeline.RunOptions{Name: "e", Seed: 11,
		Envs: map[string]pipeline.Settings{"sample": quick, "generate": quick, "reward": quick, "train": quick}},
		pipeline.LoopConfig{Iterations: 3, BatchSize: 2, Dataset: pipeline.StoreArtifact("main", standintest.DatasetPath)}, stages)
	sums := map[string]string{}
	for e, err := range st.ListObjects(ctx, "runs-e", nil) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(e.Path, "trajectories.parquet") || strings.Contains(e.Path, "/adapter/") {
			sums[e.Path] = e.Checksum
		}
	}
	return sums, trajectories(t, st, "runs-e", 3)
}

// TestEmbeddedInProcessEqualsHTTP is the parity promise: the same run
// sampling the embedded model in process and through its OpenAI-compatible
// server on loopback writes byte-identical trajectories and adapters.
func TestEmbeddedInProcessEqualsHTTP(t *testing.T) {
	inSums, rows := embeddedRun(t, embedded.ServeInProcess)
	httpSums, _ := embeddedRun(t, embedded.ServeHTTP)
	if len(inSums) != 9 {
		t.Fatalf("%d trajectories/adapter files, want 3 tables + 3 adapters × 2 files: %v", len(inSums), inSums)
	}
	for p, s := range inSums {
		if httpSums[p] != s {
			t.Errorf("%s differs: in process %s, over HTTP %s", p, s, httpSums[p])
		}
	}
	// Iteration 3 sampled from iteration 2's adapter, with token ids and
	// logprobs, all ok.
	m, _ := tiny.Embedded()
	for _, r := range rows {
		if r.Status != tables.StatusOK || !strings.HasPrefix(r.PolicyVersion, m.Version()+"+adapter-") {
			t.Errorf("row %s/%d: status %s version %s", r.PromptID, r.SampleIndex, r.Status, r.PolicyVersion)
		}
		if len(r.TokenIDs) == 0 || len(r.TokenIDs) != len(r.Logprobs) {
			t.Errorf("row %s/%d: %d tokens, %d logprobs", r.PromptID, r.SampleIndex, len(r.TokenIDs), len(r.Logprobs))
		}
	}
}
