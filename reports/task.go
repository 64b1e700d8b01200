package reports

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
)

// OutHealth is the health task's output: the iteration's row of the
// health table.
const OutHealth = "health"

// healthTaskVersion is the health stage's task version, also recorded in
// the files it writes: bump it when ComputeHealth changes a figure, and
// Load recomputes the rows the old version wrote.
const healthTaskVersion = "health-3"

// Key-value metadata of an iteration's health.parquet: the task version
// and the SHA-256 (hex) of each input the row was computed from, "" for
// an input the task did not have. Load reads the row in place of the
// iteration's tables only when these match what the ref holds.
const (
	metaHealthTask = "rlpipe.health.task"
	metaHealthFrom = "rlpipe.health.from." // + input name
)

// healthInputs are the inputs of the health stage, by the iteration file
// each is committed as.
var healthInputs = []struct{ name, file string }{
	{"trajectories", runs.TrajectoriesFile},
	{"rewards", runs.RewardsFile},
	{"metrics", runs.TrainMetricsFile},
}

// HealthSteps adds the health step to every run (a kind.StepSource for
// kind.Registry.Steps).
func HealthSteps(kind.StepBuild) ([]pipeline.Step, error) {
	return []pipeline.Step{HealthStep()}, nil
}

// HealthStep is the loop's health step: HealthTask after train, on the
// iteration's trajectories, rewards and the train task's metrics.
func HealthStep() pipeline.Step {
	return pipeline.Step{Name: "health", Task: HealthTask(), After: pipeline.SlotTrain,
		Inputs: []pipeline.StepInput{pipeline.From(pipeline.SlotGenerate, pipeline.OutTrajectories),
			pipeline.From(pipeline.SlotReward, pipeline.OutRewards), pipeline.From(pipeline.SlotTrain, pipeline.OutMetrics)},
		Outputs: []string{OutHealth}}
}

// HealthTask is the task of the loop's health step: from an iteration's trajectories,
// rewards and train metrics (inputs "trajectories", "rewards", "metrics")
// it writes health.parquet, the iteration's row of the health table
// (ComputeHealth), committed with the iteration. A run's rows together
// are its training-health table. The file records its inputs' SHA-256,
// so that a report reads the row instead of the tables while they are
// the ones it was computed from (a rescoring changes the rewards, and
// with them the row: the report then recomputes it).
func HealthTask() *pipeline.Task {
	return &pipeline.Task{
		Name: "health", Version: healthTaskVersion, Env: "health", Deterministic: true, Bookkeeping: true,
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
			// The rewards file carries its spec's correctness rule, the
			// one evaluation uses.
			rewards, rule, err := tables.ReadRewardsFile(tc.InputPath("rewards"))
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
			h := ComputeHealth(p.Iteration, trajs, rewards, tm, &HealthOptions{Correct: &rule})
			meta := map[string]string{metaHealthTask: healthTaskVersion}
			for _, in := range healthInputs {
				sum, err := fileSHA256(tc.InputPath(in.name))
				if err != nil {
					return err
				}
				meta[metaHealthFrom+in.name] = sum
			}
			f, err := os.Create(tc.OutputPath(OutHealth))
			if err != nil {
				return err
			}
			if err := writeHealth(f, []Health{h}, meta); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		},
	}
}

// fileSHA256 is the hex SHA-256 of the file at path, "" when path is ""
// or names no file.
func fileSHA256(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("health: hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
