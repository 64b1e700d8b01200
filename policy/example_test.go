package policy_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/safetensors"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// A prompt becomes a request, and each of its samples a trajectory row,
// the same way in the generate stage and in an evaluation.
func ExampleTrajectoryRow() {
	req := policy.PromptRequest(tables.Prompt{PromptID: "p1", Prompt: "2+3="}, 1)
	s := policy.Sampling{N: 1, Temperature: 1, MaxTokens: 4}
	sample := policy.Sample{Text: "5", FinishReason: policy.FinishStop}
	sampler, err := s.JSON()
	if err != nil {
		fmt.Println(err)
	}
	row := policy.TrajectoryRow(sample, req, 0, policy.RowParams{Iteration: 3}, "tiny-arith", sampler)
	fmt.Println(row.GroupID, row.Completion, row.Status, row.NumTokens, row.Sampler)
	// Output: 000003-p1 5 ok 1 {"n":1,"temperature":1,"top_p":0,"max_tokens":4}
}

// A generate task's one path from its policy input to trajectory rows:
// load the checkpoint (here the base model: no adapter directory), then
// sample the prompts in batches.
func ExampleSource_Rows() {
	ctx := context.Background()
	m, err := tiny.New(tiny.DefaultConfig(), 7)
	if err != nil {
		fmt.Println(err)
		return
	}
	p := tiny.NewPolicy(m)
	src := policy.Source{Policy: p, Identity: "tiny", Adapters: policy.NewAdapters(p, "tiny", "", 2)}
	prompts := []tables.Prompt{{PromptID: "p1", Prompt: "2+3="}, {PromptID: "p2", Prompt: "4+4="}}
	rows, err := src.Rows(ctx, "", prompts, policy.RowsOptions{Sampling: policy.Sampling{N: 2, Temperature: 1, MaxTokens: 4},
		Seed: 1, Batch: 1, Row: policy.RowParams{Iteration: 3}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range rows {
		fmt.Println(r.GroupID, r.SampleIndex, r.Status, r.Sampler)
	}
	// Output:
	// 000003-p1 0 ok {"n":2,"temperature":1,"top_p":0,"max_tokens":4}
	// 000003-p1 1 ok {"n":2,"temperature":1,"top_p":0,"max_tokens":4}
	// 000003-p2 0 ok {"n":2,"temperature":1,"top_p":0,"max_tokens":4}
	// 000003-p2 1 ok {"n":2,"temperature":1,"top_p":0,"max_tokens":4}
}

// CheckpointKind tells the two kinds of train output apart; CheckShards
// names the shard a sharded full-weights directory is missing.
func ExampleCheckShards() {
	dir, err := os.MkdirTemp("", "weights-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	f := safetensors.NewFile(map[string]string{"format": "pt"})
	f.Tensors["a.weight"] = safetensors.FromFloat32([]int{4}, []float32{1, 2, 3, 4})
	f.Tensors["b.weight"] = safetensors.FromFloat32([]int{4}, []float32{5, 6, 7, 8})
	if err := safetensors.WriteModel(dir, f, 16); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644); err != nil {
		log.Fatal(err)
	}
	kind, err := policy.CheckpointKind(dir)
	fmt.Println(kind, err, policy.CheckShards(dir))
	os.Remove(filepath.Join(dir, "model-00002-of-00002.safetensors"))
	err = policy.CheckShards(dir)
	fmt.Println(errors.Is(err, policy.ErrShards), strings.TrimPrefix(err.Error(), "check the shards of "+dir+": "))
	// Output:
	// weights <nil> <nil>
	// true shard model-00002-of-00002.safetensors, named by model.safetensors.index.json, is missing: not a policy checkpoint: shards do not match their index (the directory is incomplete or mixes two checkpoints; write it again)
}
