package temporaltests_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/executortest"
)

// TestExecutorConformance runs the executor suite against the Temporal
// executor: one server, and for each scenario workers of its own in this
// process, polling the queues of a pipeline named after the scenario.
func TestExecutorConformance(t *testing.T) {
	_, c := newServer(t)
	executortest.Run(t, func(t *testing.T, s executortest.Setup) pipeline.Executor {
		servePipeline(t, c, s.Name, s.Store, s.Tasks, s.Envs, slices.Sorted(maps.Keys(s.Envs))...)
		return newPipelineExecutor(t, c, s.Name, s.Store, zerolog.Nop())
	})
}
