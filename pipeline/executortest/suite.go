package executortest

import (
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/internal/suite"
	"github.com/rlpipe/rlpipe/pipeline"
)

// Setup is what one scenario asks of the executor under test: the store
// its run writes to and the tasks its calls run.
type Setup struct {
	// Name is unique among the suite's scenarios, e.g.
	// "retries-transient"; it is also the run's name. Scenarios run in
	// parallel: a remote executor keeps them apart with it (on Temporal,
	// as the pipeline id, so that each scenario has task queues of its
	// own).
	Name string
	// Store is the scenario's embedded store, empty but for its default
	// branch "main". The run writes to it; attempts read their inputs
	// from it and stage their outputs on the run's branch.
	Store artifacts.Store
	// Tasks are the tasks the scenario calls and Envs their
	// environments: what a pipeline.Worker serving the scenario is built
	// from (pipeline.WorkerOptions{Tasks: Tasks, Envs: Envs}).
	Tasks []*pipeline.Task
	Envs  map[string]pipeline.Settings
}

// NewExecutor returns the executor under test for one scenario, or nil
// for the local executor. A remote executor starts, in this process,
// workers over s.Store that serve s.Tasks in every environment of s.Envs
// (the suite's task bodies are Go functions that record what they see),
// and stops them with t.Cleanup. It is called from parallel tests.
type NewExecutor = func(t *testing.T, s Setup) pipeline.Executor

// subject is what a scenario runs against: its own subtest and the
// constructor of the executor under test.
type subject struct {
	t           *testing.T
	newExecutor NewExecutor
}

// scenario is one behaviour checked with an executor of its own.
type scenario = suite.Scenario[subject]

// Run checks that the executors newExecutor returns run the attempts of
// task calls as the pipeline.Executor contract says: retries, permanent
// errors, per-attempt timeouts, the deadline over all attempts,
// cancellation, and declared outputs. Each behaviour is a subtest with a
// store, a run and an executor of its own, and subtests run in parallel.
func Run(t *testing.T, newExecutor NewExecutor) {
	groups := []suite.Group[subject]{
		{Name: "Retries", Scenarios: retryScenarios},
		{Name: "Timeouts", Scenarios: timeoutScenarios},
		{Name: "Cancel", Scenarios: cancelScenarios},
		{Name: "Outputs", Scenarios: outputScenarios},
	}
	suite.Run(t, groups, func(t *testing.T) subject { return subject{t: t, newExecutor: newExecutor} })
}
