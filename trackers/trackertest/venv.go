package trackertest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/internal/pyvenv"
)

// Python is the python of the project's tracker venv (TensorBoard and
// MLflow): $RLPIPE_TRACKER_VENV, else .venv-tracking at the module's
// root. The test fails when it is missing or its pins are not the
// module's: the tests never build it, scripts/tracker-venv.sh does.
func Python(t testing.TB) string {
	t.Helper()
	root := pyvenv.Root(t)
	venv := os.Getenv("RLPIPE_TRACKER_VENV")
	if venv == "" {
		venv = filepath.Join(root, ".venv-tracking")
	}
	python := filepath.Join(venv, "bin", "python")
	want, err := os.ReadFile(filepath.Join(root, "scripts", "tracker-requirements.txt"))
	if err != nil {
		t.Fatalf("read the tracker venv's pins: %v", err)
	}
	have, err := os.ReadFile(filepath.Join(venv, ".requirements"))
	if _, perr := os.Stat(python); perr != nil || err != nil || !bytes.Equal(have, want) {
		t.Fatalf("the tracker venv %s is missing or not made from scripts/tracker-requirements.txt: run scripts/tracker-venv.sh (make deps does)", venv)
	}
	return python
}
