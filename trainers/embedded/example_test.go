package embedded_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/rollouts"
	"github.com/rlpipe/rlpipe/trainers/embedded"
)

// ExampleTask builds the train stage of a loop whose generate stage
// samples the embedded model. Each call writes the adapter directory,
// the metrics and the advantages table.
func ExampleTask() {
	m, err := tiny.Embedded()
	if err != nil {
		log.Fatal(err)
	}
	train := embedded.Task(m, embedded.Options{LR: 1e-3, Beta: 0})
	gen, err := rollouts.Task(rollouts.Options{Policy: tiny.NewPolicy(m), Identity: m.Version(),
		Sampling: policy.Sampling{N: 8, Temperature: 1, MaxTokens: 5, Logprobs: true}})
	if err != nil {
		log.Fatal(err)
	}
	_ = gen // stages := pipeline.Stages{Sample: …, Generate: gen, Reward: …, Train: train}
	fmt.Println(train.Name, train.Env, train.Deterministic)
	for _, o := range train.Outputs {
		fmt.Println(o.Name, o.File, o.Dir)
	}
	// Output:
	// train train true
	// adapter adapter true
	// metrics train_metrics.json false
	// advantages advantages.parquet false
}

// ExampleTrainer takes one GRPO update outside a pipeline: sample a group
// of completions per prompt from the base model, reward the exact answer,
// update a fresh adapter and save it with its optimizer state.
func ExampleTrainer() {
	ctx := context.Background()
	m, err := tiny.Embedded()
	if err != nil {
		log.Fatal(err)
	}
	var b embedded.Batch
	for i, p := range []tiny.Problem{{A: 123, B: 456}, {A: 808, B: 99}, {A: 17, B: 905}} {
		b.Prompts = append(b.Prompts, tables.Prompt{PromptID: fmt.Sprint("p", i), Prompt: p.Prompt(), Answer: p.Answer()})
	}
	s := policy.Sampling{N: 8, Temperature: 1, MaxTokens: 5, Logprobs: true}
	sampler, err := s.JSON()
	if err != nil {
		log.Fatal(err)
	}
	for _, pr := range b.Prompts {
		req := policy.PromptRequest(pr, 1)
		out, err := m.Generate(ctx, nil, []policy.Request{req}, s)
		if err != nil {
			log.Fatal(err)
		}
		for j, smp := range out[0] {
			tr := policy.TrajectoryRow(smp, req, j, policy.RowParams{Iteration: 1}, m.Version(), sampler)
			r := 0.0
			if tr.FinishReason == policy.FinishStop && tr.Completion == pr.Answer {
				r = 1
			}
			b.Trajectories = append(b.Trajectories, tr)
			b.Rewards = append(b.Rewards, tables.Reward{PromptID: pr.PromptID, SampleIndex: int32(j), Total: r, Status: tables.StatusOK})
		}
	}
	t, err := embedded.New(m, embedded.Options{})
	if err != nil {
		log.Fatal(err)
	}
	res, err := t.Update(ctx, b)
	if err != nil {
		log.Fatal(err)
	}
	met := res.Metrics
	fmt.Printf("%d samples, %d used, %d groups of equal rewards left out, %d optimizer step\n",
		met.Samples, met.Used, met.ZeroStdGroups, met.OptimizerSteps)
	dir, err := os.MkdirTemp("", "grpo-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := t.Save(filepath.Join(dir, "adapter")); err != nil {
		log.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "adapter", "*"))
	for _, f := range files {
		fmt.Println(filepath.Base(f))
	}
	// The next iteration continues with the same AdamW moments:
	// embedded.Load(m, embedded.Options{}, filepath.Join(dir, "adapter")).

	// Output:
	// 24 samples, 8 used, 2 groups of equal rewards left out, 1 optimizer step
	// adapter_config.json
	// adapter_model.safetensors
	// optimizer.safetensors
	// trainer_state.json
}
