package grpo

import (
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
)

// Names of a train stage's outputs — the two the loop needs and the
// advantages table — and their files under the iteration's directory;
// InAdvantages is the optional input of the loop's advantages step. Both
// trainers name them so.
const (
	InAdvantages = pipeline.OutAdvantages

	OutAdapter    = pipeline.OutAdapter
	OutMetrics    = pipeline.OutMetrics
	OutAdvantages = tables.AdvantagesName

	AdapterDir     = runs.AdapterDir
	MetricsFile    = runs.TrainMetricsFile
	AdvantagesFile = runs.AdvantagesFile
)

// Params are the loop's parameters of a train call.
type Params struct {
	Iteration int `json:"iteration"`
}

// Batch is what one update trains on: an iteration's prompts, the
// trajectories sampled for them and the rewards of those trajectories.
// Order does not matter: rows are matched by prompt id and sample index.
type Batch struct {
	Prompts      []tables.Prompt
	Trajectories []tables.Trajectory
	Rewards      []tables.Reward
	// Advantages, when not nil, are the batch's advantages as the loop's
	// advantages step wrote them (advantages.TrainTask, with the
	// trainer's NoStd and KeepZeroStd): one row per trajectory, trained
	// on as they are (advantages.Given). Nil computes them
	// (advantages.Join).
	Advantages []tables.Advantage
}

// ReadBatch reads a train call's inputs "prompts", "trajectories",
// "rewards" and, when the call has it, InAdvantages (then Advantages is
// not nil, even when the file holds no rows).
func ReadBatch(tc *pipeline.TaskContext) (Batch, error) {
	var in Batch
	var err error
	if in.Prompts, err = pipeline.ReadInput(tc, "prompts", tables.Prompts); err != nil {
		return in, err
	}
	if in.Trajectories, err = pipeline.ReadInput(tc, "trajectories", tables.Trajectories); err != nil {
		return in, err
	}
	if in.Rewards, err = pipeline.ReadInput(tc, "rewards", tables.Rewards); err != nil {
		return in, err
	}
	if tc.InputPath(InAdvantages) != "" {
		if in.Advantages, err = pipeline.ReadInput(tc, InAdvantages, tables.Advantages); err != nil {
			return in, err
		}
		if in.Advantages == nil {
			in.Advantages = []tables.Advantage{} // given, and empty
		}
	}
	return in, nil
}

// Outputs are a train task's outputs: the adapter directory, the metrics
// file (checked by checkMetrics) and the advantages table.
func Outputs(checkMetrics func(path string) error) []pipeline.Output {
	return []pipeline.Output{
		{Name: OutAdapter, File: AdapterDir, Dir: true},
		{Name: OutMetrics, File: MetricsFile, Check: checkMetrics},
		{Name: OutAdvantages, File: AdvantagesFile, Check: func(path string) error { return tables.CheckFile(path, tables.Advantages) }},
	}
}
