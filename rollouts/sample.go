package rollouts

import (
	"context"
	"errors"
	"fmt"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
)

// SampleParams are the loop's parameters of a sample call.
type SampleParams struct {
	Cursor    int `json:"cursor"`
	Count     int `json:"count"`
	Iteration int `json:"iteration"`
}

// SampleTask returns the sample stage: it takes Count prompts of the
// "dataset" input starting at Cursor, in order, wrapping around at the
// end (an epoch), and writes them as the iteration's prompts table
// (pipeline.TakeBatch). A batch holds each prompt at most once: a Count
// larger than the dataset fails the task at once (driver.Run refuses the
// config before it gets here). The loop advances the cursor only when an
// iteration commits, so a resumed run takes every prompt exactly once.
func SampleTask() *pipeline.Task {
	return &pipeline.Task{
		Name: "sample", Version: "dataset-1", Env: "sample", Deterministic: true,
		Outputs: []pipeline.Output{pipeline.TableOutput(pipeline.OutPrompts, runs.PromptsFile, tables.Prompts)},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			var p SampleParams
			if err := tc.Params(&p); err != nil {
				return err
			}
			all, err := tables.ReadFile(tc.InputPath("dataset"), tables.Prompts)
			if err != nil {
				return pipeline.Permanent(fmt.Errorf("dataset: %w", err))
			}
			if len(all) == 0 {
				return pipeline.Permanent(errors.New("the dataset has no prompts; import some with `rlpipe dataset`"))
			}
			rows, err := pipeline.TakeBatch(all, p.Cursor, p.Count)
			if err != nil {
				return pipeline.Permanent(err)
			}
			return tables.WriteFile(tc.OutputPath(pipeline.OutPrompts), tables.Prompts, rows, nil)
		},
	}
}
