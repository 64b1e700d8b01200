package rewards

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/pipeline"
)

var _ Memoizer = (*pipeline.TaskContext)(nil)

// taskName is the reward task's name. The engine keeps memo records by
// task name, not version, so a new spec still replays the verifier and
// judge calls it repeats: the name must not change.
const taskName = "reward"

// Task is the reward stage of the loop for a compiled spec: it scores an
// iteration's trajectories (input "trajectories", and "prompts" when the
// call has one) into "rewards" (rewards.parquet). Each call gives the
// program its *pipeline.TaskContext as the Memoizer, so the verifiers and
// judges record and replay their results through the call's trace. The
// task's version is "cel-" and the hex of the spec's digest, so a new
// spec invalidates exactly the reward tasks. The program is compiled
// once, by the caller; the task never compiles. A batch where no sample
// is scored and some rewards are NaN or infinite fails the task, not
// retried, with a *tables.NonfiniteError (Summary.CheckFinite). A spec
// of expressions alone (Program.ExpressionsOnly) makes the task
// bookkeeping: the run scores in its own process whatever its executor.
func Task(prog *Program) *pipeline.Task {
	return &pipeline.Task{
		Name: taskName, Version: "cel-" + strings.TrimPrefix(prog.Digest(), "sha256:"), Deterministic: true,
		Bookkeeping: prog.ExpressionsOnly(),
		Outputs:     []pipeline.Output{{Name: pipeline.OutRewards, File: runs.RewardsFile}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			so := &ScoreOptions{Name: tc.Task + " trajectories", Memo: tc}
			if p := tc.InputPath("prompts"); p != "" {
				f, size, err := openFile(p)
				if err != nil {
					return err
				}
				defer f.Close()
				// Read while the trajectories are decoded.
				so.Prompts = prog.ReadPromptsAsync(ctx, f, size, runs.PromptsFile)
			}
			src, size, err := openFile(tc.InputPath("trajectories"))
			if err != nil {
				return err
			}
			defer src.Close()
			dst, err := os.Create(tc.OutputPath(pipeline.OutRewards))
			if err != nil {
				return err
			}
			sum, err := prog.ScoreFile(ctx, dst, src, size, so)
			if err != nil {
				dst.Close()
				if so.Prompts != nil && so.Prompts.Err() != nil {
					return pipeline.Permanent(err)
				}
				return err
			}
			if err := dst.Close(); err != nil {
				return err
			}
			// Rewards that are all NaN or infinite leave nothing to train
			// on; scoring again gives the same values.
			return pipeline.Permanent(sum.CheckFinite())
		},
	}
}

func openFile(path string) (*os.File, int64, error) {
	f, err := os.Open(filepath.Clean(path))
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}
