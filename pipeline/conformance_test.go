package pipeline_test

import (
	"testing"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/executortest"
)

// TestExecutorConformance runs the executor suite against the local
// executor (RunOptions.Executor nil).
func TestExecutorConformance(t *testing.T) {
	executortest.Run(t, func(*testing.T, executortest.Setup) pipeline.Executor { return nil })
}
