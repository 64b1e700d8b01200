// Package trackertest is the conformance suite every trackers.Tracker
// backend runs, the real MLflow tracking server the tests of trackers,
// pipeline/driver and cli read their runs back from, and wandb's own
// reader of offline W&B runs (WandbRuns).
//
// A backend calls Run from its own tests with a function that returns a
// fresh Backend: how to open its trackers (every one recording to the
// same place, so that a second is a resumed run's) and how to read back
// what they recorded, with the backend's own reader (TensorBoard's
// EventAccumulator, the MLflow server's REST API, `wandb leet inspect`):
//
//	func TestConformance(t *testing.T) {
//		trackertest.Run(t, func(t *testing.T) trackertest.Backend {
//			dir := t.TempDir()
//			return trackertest.Backend{Open: …(TensorBoard on dir), Read: …(read dir/RUN)}
//		})
//	}
//
// Each behaviour is a subtest with a fresh backend and run names of its
// own. End times are fixed, so no assertion depends on timing.
//
//   - Ends: Start, Log and End with Finished, Failed or Killed: the run
//     holds the logged steps once each, and (a backend with Statuses)
//     that status and the outcome's end time, to the millisecond.
//   - Running: End with Running leaves the tracker's run open, no end
//     time.
//   - Resumes: a run killed, then a second tracker started for it (the
//     run resumed): the same tracker run, open again while the second
//     goes; once that ends Finished, one run, finished at its end time,
//     holding the steps of both.
//   - Stopped: End with Stopped (a back-fill of a run that stopped
//     early) keeps the status and end time of a run that ended failed or
//     killed, and makes an open one failed at the outcome's time.
//   - WithoutStart: End of a tracker never started returns nil and
//     records nothing.
//
// The MLflow server (MLflowServer) and TensorBoard's reader run from the
// project's tracker venv (Python), which scripts/tracker-venv.sh makes
// (`make deps` runs it); the tests never build it, and are skipped, naming
// the script, without it.
package trackertest
