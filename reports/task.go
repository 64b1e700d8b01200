package reports

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
)

// OutHealth is the health task's output: the iteration's row of the
// health table.
const OutHealth = "health"

// HealthTask is the loop's health stage: from an iteration's trajectories,
// rewards and train metrics (inputs "trajectories", "rewards", "metrics")
// it writes health.parquet, the iteration's row of the health table
// (ComputeHealth), committed with the iteration. A run's rows together
// are its training-health table.
func HealthTask() *pipeline.Task {
	return &pipeline.Task{
		Name: "health", Version: "health-1", Env: "health", Deterministic: true,
		Outputs: []pipeline.Output{{Name: OutHealth, File: runs.HealthFile}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			var p struct {
				Iteration int `json:"iteration"`
			}
			if err := tc.Params(&p); err != nil {
				return err
			}
			trajs, err := tables.ReadFile(tc.InputPath("trajectories"), tables.Trajectories)
			if err != nil {
				return pipeline.Permanent(fmt.Errorf("health: %w", err))
			}
			rewards, err := tables.ReadFile(tc.InputPath("rewards"), tables.Rewards)
			if err != nil {
				return pipeline.Permanent(fmt.Errorf("health: %w", err))
			}
			var tm *TrainMetrics
			if path := tc.InputPath("metrics"); path != "" {
				b, err := os.ReadFile(path)
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
				if err == nil {
					// Metrics in another shape (a stand-in's) leave the
					// trainer's columns null.
					tm, _ = ParseTrainMetrics(b)
				}
			}
			h := ComputeHealth(p.Iteration, trajs, rewards, tm, nil)
			f, err := os.Create(tc.OutputPath(OutHealth))
			if err != nil {
				return err
			}
			if err := WriteHealth(f, []Health{h}); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		},
	}
}
