package kinds_test

import (
	"context"
	"fmt"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/kind"
)

// constantKind is a reward stage kind that gives every sample the same
// score: the whole of a new kind is this much code and one line in the
// registry.
type constantKind struct{}

func (constantKind) Name() string    { return "constant" }
func (constantKind) Slots() []string { return []string{pipeline.SlotReward} }
func (constantKind) New() kind.Stage { return &constant{} }

type constant struct {
	Score float64 `yaml:"score"`
}

func (s *constant) Check(c kind.Checker) {
	if !kind.OnlyIn(c, pipeline.SlotReward, "can be a constant") {
		return
	}
	if s.Score < 0 || s.Score > 1 {
		c.Fail("score", "", "%s: must be in [0, 1], got %g", c.Path("score"), s.Score)
	}
}

func (s *constant) Task(b kind.Build) (*pipeline.Task, error) {
	return &pipeline.Task{Name: b.Slot, Env: b.Env, Version: b.Versioned(fmt.Sprintf("constant-%g", s.Score)),
		Outputs: []pipeline.Output{{Name: pipeline.OutRewards, File: "rewards.parquet"}},
		Run:     func(ctx context.Context, tc *pipeline.TaskContext) error { return nil }}, nil
}

// A program adds its own stage kind to the registry rlpipe ships; the
// pipeline file names it like any other, with the same strict checks.
func ExampleRegistry() {
	reg := kinds.Registry()
	reg.Kinds = append(reg.Kinds, constantKind{})
	file := func(reward string) []byte {
		return []byte(`iterations: 2
batch_size: 4
dataset: main:data/prompts.parquet
stages:
  sample: {kind: standin}
  generate: {kind: standin}
  reward: ` + reward + `
  train: {kind: standin}
`)
	}
	_, err := config.Parse("pipeline.yaml", file("{kind: constant, scroe: 0.5}"), reg)
	fmt.Println(err)
	_, err = config.Parse("pipeline.yaml", file("{kind: standin, score: 0.5}"), reg)
	fmt.Println(err)
	c, err := config.Parse("pipeline.yaml", file("{kind: constant, score: 0.5, version: v2}"), reg)
	if err != nil {
		panic(err)
	}
	plan, err := c.Plan(context.Background())
	if err != nil {
		panic(err)
	}
	defer plan.Close()
	fmt.Println(plan.Stages.Reward.Name, plan.Stages.Reward.Version, plan.Stages.Reward.Env)
	// Output:
	// pipeline.yaml:7:28: unknown key "scroe" in stages.reward (did you mean "score"?)
	// pipeline.yaml:7:27: stages.reward.score: only constant stages take score (use kind: constant on the reward stage)
	// reward constant-0.5+v2 reward
}
