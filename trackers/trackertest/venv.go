package trackertest

import (
	"testing"

	"github.com/rlpipe/rlpipe/internal/pyvenv"
)

// Python is the python of the project's tracker venv (TensorBoard and
// MLflow): $RLPIPE_TRACKER_VENV, else .venv-tracking at the module's
// root (internal/pyvenv). The tests never build it, scripts/tracker-venv.sh
// does (`make deps` runs it): the test is skipped, naming the script,
// without the venv, and fails when its pins are not the module's.
func Python(t testing.TB) string {
	t.Helper()
	return pyvenv.Tracker.Python(t, "read TensorBoard's events and run an MLflow server")
}
