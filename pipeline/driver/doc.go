// Package driver runs a pipeline's loop the way `rlpipe run` does, for
// the command, for a driver worker on Temporal, and for a program that
// uses rlpipe as a library.
//
// Run takes a parsed pipeline config (pipeline/config) and an open store
// and runs or resumes the run to its last iteration:
//
//   - it keeps a resumed run's estimator: when the file does not set
//     advantages.std and the run's last committed advantages table
//     divided by the population std (every run before the sample std
//     became the default), the run resumes with std: population, says
//     so in a warning, and records it in the effective config;
//   - it plans the engine's inputs from the config (config.Config.Plan);
//   - it opens the run (pipeline.Open), which locks it: a second process
//     gets pipeline.ErrRunLocked;
//   - it stages the effective config, secrets redacted and headed by its
//     hash, at runs.ConfigPath on the run branch, so that the next committed
//     iteration records exactly what ran (and drops it again when no
//     iteration committed, leaving the branch clean);
//   - it runs the loop (pipeline.Run.Loop) and returns a Summary: the
//     iterations, the commit, the task calls that ran or were cached,
//     the time per stage.
//
// A run that stops resumes on the next call from its last committed
// iteration, and finished tasks of the interrupted one are cache hits,
// so calling Run again is always the remedy its errors suggest.
//
// Presentation stays with the caller: Options.OnEvent sees every engine
// event (for a live display) and Options.OnCommit every committed
// iteration (to print it, or to refresh a report). The rlpipe command
// supplies both; a library user may supply neither.
//
// On Temporal, a driver worker (the command's `rlpipe worker --driver`)
// runs the same Run with the Temporal executor as Options.Executor; the
// package itself never links Temporal: an executor is a value it is
// given. PipelineID names the pipeline's task queues, the same on the
// driver and on every worker.
//
// Evaluate evaluates chosen checkpoints of a run with the config's eval
// section, as `rlpipe eval` does, and commits the evaluations on the run
// branch; checkpoints the loop already evaluated are cache hits.
//
// The package imports the engine, the config and the store, never the
// command, a stage package or an executor's (internal/layers checks it):
// the stage kinds a config may name are the registry's that parsed the
// config (cli/kinds for rlpipe).
package driver
