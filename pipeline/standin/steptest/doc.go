// Package steptest is the shared suite every iteration step runs
// (pipeline.Step): one test body, every step, so that a step added
// between reward and train — or anywhere else — is wired, written,
// deterministic and resumable the way the loop's own steps are.
//
// A step's package calls Run from its tests with a function that returns
// a fresh step value for each scenario:
//
//	func TestStepConformance(t *testing.T) {
//		steptest.Run(t, func(testing.TB) pipeline.Step { return advantages.Step(advantages.TrainOptions{}) })
//	}
//
// Each scenario runs the step in a loop of stand-in stages
// (pipeline/standin) on a fresh embedded store, with the cache on and
// every environment at the engine's defaults, for Iterations iterations:
//
//   - InputsExistUpstream: every input the step declares comes from a
//     slot, the starting policy or a fixed artifact, with an output its
//     producer declares (pipeline.CheckSteps), and Loop accepts it.
//   - OutputsWritten: in each iteration its When lets it run, every
//     output the step declares is committed, not empty, in the step's
//     directory (its Dir, or the iteration's), and the iteration's task
//     metrics name the step's call.
//   - Deterministic: two runs with the same seed on two stores commit
//     byte-identical outputs of the step.
//   - ResumeDoesNotRerun: a loop stopped after iteration 1 and resumed by
//     a new Run starts no call of the step for the committed iteration,
//     and runs the step in the next.
//
// The suite runs the step alone beside the four slots, so its inputs may
// come from the slots and the starting policy only (a step that reads
// another step's output runs the suite with that step first: see Run's
// before argument). Outputs are files; a directory output is checked for
// being listed only.
package steptest
