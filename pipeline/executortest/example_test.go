package executortest_test

import (
	"testing"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/executortest"
)

// An executor's package runs the suite from a test of its own; the local
// executor is nil. A remote executor's function also starts workers for
// each scenario's Setup (see the package documentation).
func ExampleRun() {
	_ = func(t *testing.T) { // func TestExecutorConformance(t *testing.T)
		executortest.Run(t, func(*testing.T, executortest.Setup) pipeline.Executor { return nil })
	}
}
