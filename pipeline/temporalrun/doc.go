// Package temporalrun runs rlpipe pipelines on Temporal: each task
// environment is a task queue served by `rlpipe worker --env NAME`
// processes on the hosts that suit it (GPU hosts beside a vLLM server,
// CPU hosts for sandboxes, a GPU node for the trainer), and the loop
// itself runs as a Temporal workflow, so that no process — worker or
// driver — takes the run down with it.
//
// Three pieces:
//
//   - Executor is a pipeline.Executor. The engine still plans the
//     iteration and consults the cache; each call the cache does not
//     answer becomes a task workflow (TaskID: repository, branch,
//     directory, call and cache key) on the queue of its environment
//     (Queue). The workflow runs attempts as activities with the local
//     executor's semantics (the first attempt of a call known to be
//     short runs inside the workflow task, as a local activity): retries.attempts, backoff as durable timers,
//     the per-attempt timeout (enforced by the worker, which kills the
//     task's processes; a Temporal start-to-close timeout is the
//     backstop), the deadline as a schedule-to-close bound, and
//     heartbeats. An attempt whose worker stops heartbeating is run
//     again on another worker without counting against retries.
//
//   - Serve runs the worker side: a pipeline.Worker, built from the same
//     pipeline config as the driver, runs each attempt — inputs are read
//     from the store, outputs staged on the run branch — and keeps warm
//     state (a loaded model, a built sandbox world) between attempts.
//     Only jobs (artifact references, checksums, settings) and results
//     (the same) travel through Temporal, never data.
//
//   - The run workflow (StartRun) runs the loop as one long activity on
//     the driver queue. The loop is ordinary Go code whose durability
//     comes from the store: iterations commit, finished tasks are cache
//     hits, and task workflows outlive their driver. When the driver's
//     host dies its heartbeat stops and Temporal hands the loop to
//     another driver worker, which resumes it from the last committed
//     iteration and attaches to the task workflows still running.
//
// Every process must reach the same store — a lakeFS repository, or an
// embedded store served with `rlpipe store serve` — and be started from
// the same pipeline config (a job carries the config hash, and a worker
// built from another config refuses it). See docs/DEPLOY.md.
package temporalrun
