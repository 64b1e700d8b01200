// Package pipeline is rlpipe's engine: task environments, tasks, the DAG
// of an iteration, the local executor, the content-addressed cache,
// memoized calls, and the durable run that resumes after a crash.
//
// A run is a branch of the artifact store (runs-<name>). Its loop is
// ordinary Go code: each iteration adds task calls to a DAG, and each call
// starts as soon as its inputs exist, independent calls concurrently:
//
//	run, err := pipeline.Open(ctx, store, pipeline.RunOptions{Name: "exp1", Envs: envs})
//	defer run.Close()
//	it := run.Iteration(7)
//	gen := it.Go(ctx, generate, pipeline.Call{Inputs: map[string]pipeline.Artifact{"prompts": prompts}})
//	rew := it.Go(ctx, reward, pipeline.Call{Inputs: map[string]pipeline.Artifact{"trajectories": gen.Output("trajectories")}})
//	commit, err := it.Commit(ctx, state, nil)
//
// Run.Loop wires the RL iteration: the four slots of Stages (sample,
// generate, reward, train) and its Steps, task values placed after a slot
// or a step, with inputs named by the outputs they read (Step: the
// advantages a trainer trains on, the training health, the evaluation of
// checkpoints). TaskOrder lists them; CheckSteps says whether they fit.
// With LoopConfig.MaxGenBatches (the file's filter_groups, DAPO's dynamic
// sampling) an iteration's sample, generate and reward run in rounds
// until the batch holds enough groups whose rewards differ, and
// FilterGroupsTask merges the rounds into the iteration's files
// (filter.go); each round is a cached call, so a resumed run takes the
// same rounds without sampling any again.
//
// A task is a Go function (Task.Run) or an external command (Task.Command,
// whose arguments may hold {{inputs.NAME}} and {{outputs.NAME}}). It reads
// its inputs from local files and writes its declared outputs to local
// files; the engine uploads them to the run branch as staged changes the
// moment the task succeeds, and records a cache entry keyed by the task's
// name, version, cache version and salt, its inputs' content checksums and
// its canonical parameters. A later call with the same key — in this run,
// a resumed one, or any other run of the repository — links the recorded
// outputs into place without running the task or copying bytes.
//
// Settings resolve environment → task → call (Settings.Merge): resources
// the local executor admits tasks by, retries with capped exponential
// backoff (Permanent marks an error not worth retrying), a timeout per
// attempt (a command's whole process group is killed), a deadline over all
// attempts, the cache policy, a concurrency cap, and reuse of warm state
// (TaskContext.Warm).
//
// TaskContext.Memo wraps a side-effectful call (a paid judge, a sandbox
// run): its result is recorded the moment it returns and replayed by a
// retry or a resumed run instead of calling again.
//
// Iteration.Commit stages the loop state (run/state.json) and commits the
// run branch with metadata naming the iteration, the config hash and each
// task's cache key. The commit is the durability point: a resumed run
// loads the state of the last committed iteration, and the tasks of the
// interrupted one are cache hits if they finished.
//
// # Checklist for an executor and for a step
//
//   - An executor: required, an Executor (Execute: retries, timeouts, the
//     deadline, declared outputs staged on the job's branch) and an
//     ExecutorKind (Name, Open) that --executor names; its test is
//     pipeline/executortest.Run on what Open returns, and it is one entry
//     in cli/kinds.Registry's Executors.
//   - A step: required, a Step with Name, Task, After, Inputs and Outputs;
//     optional Before (the slot it feeds), Params, When, Dir; its test is
//     pipeline/standin/steptest.Run, and it is added by one line (a stage's
//     Steps, or a kind.StepSource in the registry's Steps).
package pipeline
