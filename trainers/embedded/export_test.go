package embedded

import (
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// TaskWithFaults is Task with planned failures: crash(iteration, attempt)
// true makes the attempt write half its adapter and fail with a transient
// error; nan(iteration) true puts a NaN into that iteration's loss.
func TaskWithFaults(m *tiny.Model, o Options, crash func(iteration, attempt int) bool, nan func(iteration int) bool) *pipeline.Task {
	return newTask(m, o, faults{crash: crash, nan: nan})
}
