// Package trackers sends a run's figures to the experiment trackers
// practitioners already keep their curves in: TensorBoard event files, an
// MLflow tracking server and Weights & Biases, several at once, while the
// loop runs or afterwards.
//
// # What a tracker gets
//
// A Tracker gets a Run (the name, the effective config with every
// default filled in and secrets redacted, its hash, the config flattened
// to parameters) and Points: one per committed iteration, at the
// iteration's step, and one per evaluated checkpoint, at the
// checkpoint's step (0 for the starting policy). A
// point's scalars are tagged by where they come from:
//
//	train/<metric>          every number of the train stage's metrics file (runs.ReadTrainMetrics)
//	reward/<component>      each reward component's mean over the scored samples; reward/total
//	health/<column>         the numeric columns of the iteration's health row
//	filter_groups/<field>   with dynamic sampling, each number of filter_groups.json and rounds, the rounds drawn
//	eval/<set>/<metric>     every eval metric (runs.ReadEvals), and …/low and …/high of its 95% interval
//
// and its text TagCommit holds the commit that recorded it, so that any
// point of a tracker leads back to the store (`rlpipe ls COMMIT`). Each
// point's time is its commit's: a back-fill writes the same times as the
// live run did.
//
// An evaluation's point names its checkpoint (Point.Checkpoint), and the
// eval series are pass@k per checkpoint: one series per metric and k, at
// the checkpoint's step (W&B also plots eval/* against its step metric
// "checkpoint"). A tracker whose entry sets artifacts: checkpoints
// (CheckpointKeeper: MLflow, W&B) also gets the adapter or weights of
// each evaluated checkpoint, copied out of the store after the Log of its
// evaluation (KeepCheckpoints): MLflow under checkpoints/iteration-NNNNNN,
// W&B as a version of the model artifact model-<id>.
//
// # How a run ends
//
// A tracker's last call is End with the run's Outcome: Finished,
// Failed (an error stopped the loop), Killed (interrupted: Ctrl-C,
// SIGTERM, a cancelled context), Running (a back-fill of a run another
// process holds: left open) or Stopped (a back-fill of a run that stopped
// early, cause unknown), and when. MLflow sets its run's status and end
// time; a resumed run's Start re-opens the same MLflow run. TensorBoard
// has no status to record: End flushes and closes the event file. W&B
// gets the run's exit code (0, 1, or 255 for killed, as wandb marks a
// Ctrl-C); a resumed run's Start continues the same W&B run. Every
// backend runs the contract's suite, trackertest.Run.
//
// # Backends
//
// A backend is a value with a Name (TensorBoardBackend, MLflowBackend)
// that the program lists in its one registry value (kind.Registry's
// Trackers, assembled by cli/kinds.Registry), and names its options: the keys of its entry in
// pipeline.yaml's tracking section, decoded strictly by the pipeline
// config.
//
//	tracking:
//	  - {kind: tensorboard, dir: tb}
//	  - {kind: mlflow, uri: "http://127.0.0.1:5000", experiment: rlpipe}
//	  - {kind: wandb, dir: wb, python: .venv-tracking}
//
// TensorBoard writes TFRecord files of Event protocol buffers, encoded by
// field number (no generated code), which TensorBoard's own reader reads
// back with the exact float32 values. MLflow speaks the tracking server's
// REST API: one MLflow run per rlpipe run, found again by its tag TagRun
// when the run resumes. W&B is written through the real wandb package, in
// a Python worker the tracker supervises (wandb_worker.py, JSON lines):
// offline (a run directory `wandb sync` uploads) unless WANDB_API_KEY is
// in the environment; its id is the run's name, and pass@k and every
// eval metric have the step metric "checkpoint". Credentials come only
// from the environment.
//
// # Never in the loop's way
//
// The engine's driver feeds the trackers through a Feed: the loop only
// queues each committed iteration (Feed.Committed never blocks); a
// goroutine reads the iteration's points from the store, and one
// goroutine per tracker sends them with retries and backoff. A tracker
// that is down or slow loses points, with a warning, never the loop's
// time; Backfill (`rlpipe track RUN --to KIND:TARGET`) brings it level
// afterwards from what the store holds:
//
//	run, err := trackers.ReadRun(ctx, st, "arith", runs.Branch("arith"))
//	backends := kinds.Registry().Trackers // the program's tracker backends
//	spec, err := backends.ParseTarget("tensorboard:tb")
//	t, err := backends.Open(spec)
//	n, err := trackers.Backfill(ctx, st, run, runs.Branch("arith"), t, trackers.Outcome{Status: trackers.Finished})
//
// # Checklist for a tracker backend
//
//   - Required: Backend (Name, Options, Open, Target) and the Tracker it
//     opens (Start, Log, End), with Log idempotent per step.
//   - Optional, on the options value: Validate (Validator), Where (the
//     target --to names), Rebase (relative paths); on the tracker: Check
//     (Checker), the plan-time check that fails a run whose tracker
//     cannot work (wandb missing from its python); KeepCheckpoint
//     (CheckpointKeeper), for a tracker that stores files.
//   - Its test: trackers/trackertest.Run, reading back with the tracker's
//     own reader or server; one entry in cli/kinds.Registry's Trackers.
package trackers
