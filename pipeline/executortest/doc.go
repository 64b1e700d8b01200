// Package executortest is the conformance suite every pipeline.Executor
// runs: one test body, every executor, so that a pipeline retries, times
// out, gives up and stages its outputs the same way in this process and
// on Temporal.
//
// An executor calls Run from its own tests with a function that returns
// the executor for one scenario. The local executor is nil:
//
//	func TestExecutorConformance(t *testing.T) {
//		executortest.Run(t, func(*testing.T, executortest.Setup) pipeline.Executor { return nil })
//	}
//
// A remote executor also serves the scenario's tasks: Setup names the
// scenario and holds its store, its tasks and their environments, and the
// function starts workers for them in this process (the task bodies are
// Go functions that record what they see) and registers their cleanup.
// On Temporal, with a server and a client c shared by the scenarios:
//
//	executortest.Run(t, func(t *testing.T, s executortest.Setup) pipeline.Executor {
//		w, err := pipeline.NewWorker(s.Store, pipeline.WorkerOptions{Tasks: s.Tasks, Envs: s.Envs})
//		// handle err
//		ws, err := temporalrun.Workers(temporalrun.WorkerOptions{Client: c, Repository: "conformance",
//			Pipeline: s.Name, Envs: slices.Collect(maps.Keys(s.Envs)), Worker: w})
//		// handle err; start each of ws, and t.Cleanup(its Stop)
//		x, err := temporalrun.NewExecutor(temporalrun.ExecutorOptions{Client: c, Repository: "conformance",
//			Pipeline: s.Name, Store: s.Store})
//		// handle err
//		return x
//	})
//
// Scenarios run in parallel, so the function must be safe to call
// concurrently and must keep scenarios apart (above: Setup.Name as the
// pipeline id gives each scenario task queues of its own). Select
// behaviours with -run, e.g. -run 'TestExecutorConformance/Timeouts/'.
//
// The suite drives the executor through a pipeline.Run, as the engine
// does, with the cache off, and checks each call by exact counts: the
// attempts its task bodies saw, the attempts its *pipeline.TaskError
// reports, the named errors it matches (errors.Is: ErrPermanent,
// ErrTimeout, ErrDeadline, ErrOutput), and its events — a started event
// first, a retried event per retried attempt with that attempt's error,
// and one finished or failed event last. A remote executor may report a
// started event for each attempt or only for the first, so started
// events are not counted. The behaviours:
//
//   - Retries: a transient failure is retried until the attempts run out
//     (Transient, Exhausted); a Permanent error ends the call at once.
//   - Timeouts: the per-attempt timeout stops a body that never returns
//     (ErrTimeout, each attempt); the deadline over all attempts stops a
//     running attempt, or the wait for the next one (ErrDeadline).
//   - Cancel: cancelling the call's context cancels its running attempt,
//     wherever it runs, and the call ends with context.Canceled, neither
//     retried nor reported failed.
//   - Outputs: declared outputs, files and directories, are staged on the
//     run's branch with the store's checksums and feed a downstream call;
//     a missing output, an empty output directory and one its Check
//     refuses fail at once (ErrOutput, Permanent).
//
// No assertion depends on timing. Timeouts are generous bounds (a
// scenario's deadline leaves seconds for an attempt that needs
// milliseconds) or stop a body that never returns on its own.
package executortest
