package config_test

import (
	"context"
	"fmt"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline/config"
)

func ExampleParse() {
	src := []byte(`run: exp1
iterations: 10
batch_size: 16
dataset: main:data/prompts.parquet
environments:
  gen: {retires: {attempts: 3}}
stages:
  sample: {kind: standin}
  generate: {kind: standin, env: gen}
  reward: {kind: standin}
  train: {kind: standin}
`)
	_, err := config.Parse("pipeline.yaml", src, kinds.Registry())
	fmt.Println(err)

	c, err := config.Parse("pipeline.yaml", []byte(`run: exp1
iterations: 10
batch_size: 16
dataset: main:data/prompts.parquet
stages:
  sample: {kind: standin}
  generate: {kind: standin, sleep: 2s, samples_per_prompt: 4}
  reward: {kind: standin}
  train: {kind: standin}
`), kinds.Registry())
	if err != nil {
		panic(err)
	}
	plan, err := c.Plan(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println(plan.Run.Name, plan.Loop.Iterations, plan.Loop.BatchSize, plan.Loop.Dataset.Ref, plan.Loop.Dataset.Path)
	// Output:
	// pipeline.yaml:6:9: unknown key "retires" in environments.gen (did you mean "retries"?)
	// exp1 10 16 main data/prompts.parquet
}
