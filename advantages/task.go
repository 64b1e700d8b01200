package advantages

import (
	"context"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
)

// OutAdvantages is the output of Task.
const OutAdvantages = "advantages"

// Task is the engine task that computes an iteration's advantages with
// Compute's defaults: input "rewards" (rewards.parquet), output
// "advantages" (advantages.parquet), one row per reward row in the same
// order. Its name and version ("advantages", "grpo-1") enter the cache
// key, so change the version when the advantages written change.
func Task() *pipeline.Task {
	return &pipeline.Task{
		Name: "advantages", Version: "grpo-1", Deterministic: true,
		Outputs: []pipeline.Output{{Name: OutAdvantages, File: "advantages.parquet"}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			rows, err := pipeline.ReadInput(tc, pipeline.OutRewards, tables.Rewards)
			if err != nil {
				return err
			}
			adv, _ := Compute(rows, Options{})
			return tables.WriteFile(tc.OutputPath(OutAdvantages), tables.Advantages, adv, nil)
		},
	}
}
