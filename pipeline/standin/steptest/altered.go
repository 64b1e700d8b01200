package steptest

import (
	"context"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
)

// Altered is s with its output table out rewritten by edit after its task
// wrote it: a fault for the tests of what reads the step (a trainer given
// advantages that do not fit its batch).
func Altered[T any](s pipeline.Step, out string, t *tables.Table[T], edit func([]T) []T) pipeline.Step {
	task := *s.Task
	run := task.Run
	task.Run = func(ctx context.Context, tc *pipeline.TaskContext) error {
		if err := run(ctx, tc); err != nil {
			return err
		}
		rows, err := tables.ReadFile(tc.OutputPath(out), t)
		if err != nil {
			return err
		}
		return tables.WriteFile(tc.OutputPath(out), t, edit(rows), nil)
	}
	s.Task = &task
	return s
}
