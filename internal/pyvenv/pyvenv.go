// Package pyvenv finds the project's Python venvs for the tests that run
// real Python libraries: torch, transformers, PEFT, vLLM and torchrun
// (Py), the official openai SDK (SDK), Hugging Face datasets (Data), and
// TensorBoard, MLflow and wandb (Tracker).
//
// `make deps` makes every venv (scripts/deps.sh runs each one's script;
// `make test` runs deps first); a test never makes one, so `go test`
// never installs from the package index. A test whose venv is absent is
// skipped with one line naming the script that makes it; a venv that is
// there but was not made from its pins (an older or interrupted install)
// fails the test, naming the same script. Run runs a script and fails
// the test with its standard error. Test code only: it imports
// testing (policy/vllmserver finds the venv with vLLM by Py's rule for
// programs).
package pyvenv

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Venv is one of the project's venvs.
type Venv struct {
	// Name is its directory at the top of the repository: ".venv-data".
	Name string
	// Env names the variable that points at another directory, which its
	// script honours too.
	Env string
	// Script makes it, from the top of the repository:
	// "scripts/data-venv.sh".
	Script string
	// Requirements are its pins, from the top of the repository. Script
	// copies them into the venv (.requirements) once they are installed;
	// the copy tells a venv made from them.
	Requirements string
}

// The project's venvs.
var (
	// Py has torch, transformers, PEFT, vLLM's CPU build and torchrun:
	// the real path on CPU (about 6 GB).
	Py = Venv{Name: ".venv-py", Env: "RLPIPE_PY_VENV", Script: "scripts/py-venv.sh", Requirements: "scripts/py-requirements.txt"}
	// SDK has the official openai Python SDK.
	SDK = Venv{Name: ".venv-sdk", Env: "RLPIPE_SDK_VENV", Script: "scripts/sdk-venv.sh", Requirements: "scripts/sdk-requirements.txt"}
	// Data has Hugging Face datasets, pyarrow, polars and duckdb.
	Data = Venv{Name: ".venv-data", Env: "RLPIPE_DATA_VENV", Script: "scripts/data-venv.sh", Requirements: "scripts/data-requirements.txt"}
	// Tracker has TensorBoard, MLflow and wandb.
	Tracker = Venv{Name: ".venv-tracking", Env: "RLPIPE_TRACKER_VENV", Script: "scripts/tracker-venv.sh", Requirements: "scripts/tracker-requirements.txt"}
	// OpenEnv has openenv and uvicorn: the OpenEnv environment servers
	// rlpipe starts (its own venv: openenv's pins clash with vLLM's).
	OpenEnv = Venv{Name: ".venv-openenv", Env: "RLPIPE_OPENENV_VENV", Script: "scripts/openenv-venv.sh", Requirements: "scripts/openenv-requirements.txt"}
	// Harbor has harbor on Python >= 3.12: the reference rlpipe's reading
	// of Harbor tasks is checked against. scripts/harbor-venv.sh skips it
	// where no Python 3.12 is found.
	Harbor = Venv{Name: ".venv-harbor", Env: "RLPIPE_HARBOR_VENV", Script: "scripts/harbor-venv.sh", Requirements: "scripts/harbor-requirements.txt"}
)

// Dir is v's directory for the repository at root: $Env when set, else
// root/Name.
func (v Venv) Dir(root string) string {
	if d := os.Getenv(v.Env); d != "" {
		return d
	}
	return filepath.Join(root, v.Name)
}

// Python is v's interpreter as an absolute path. The test is skipped,
// in one line saying which venv is absent, the script that makes it and
// what the test wanted it for (why), when there is no interpreter; it
// fails when the venv was not made from its pins.
func (v Venv) Python(t testing.TB, why string) string {
	t.Helper()
	root := Root(t)
	venv, err := filepath.Abs(v.Dir(root))
	if err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(venv, "bin", "python")
	if _, err := os.Stat(py); err != nil {
		t.Skipf("no %s at %s: run make deps (%s) to %s", v.Name, venv, v.Script, why)
	}
	want, err := os.ReadFile(filepath.Join(root, v.Requirements))
	if err != nil {
		t.Fatalf("pyvenv: read the pins of %s: %v", v.Name, err)
	}
	if have, err := os.ReadFile(filepath.Join(venv, ".requirements")); err != nil || !bytes.Equal(have, want) {
		t.Fatalf("the venv %s was not made from %s (an older or interrupted install): run make deps (%s)", venv, v.Requirements, v.Script)
	}
	return py
}

// Python is Py's interpreter (see Venv.Python).
func Python(t testing.TB, why string) string {
	t.Helper()
	return Py.Python(t, why)
}

// Root is the repository's top directory: the nearest parent of the
// working directory with a go.mod.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("pyvenv: no go.mod above the working directory")
		}
		dir = up
	}
}

// Run runs py (a venv's python, or any program) with args, feeding it
// stdin, and returns what it wrote to standard output. When it fails, the
// test fails with what (the script it ran, or what it was for), the error
// and the program's standard error.
func Run(t testing.TB, what string, stdin []byte, py string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(py, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, stderr.Bytes())
	}
	return out
}

// Peer is the interpreter the parity tests run the peers' own code
// (verl, TRL) under: $RLPIPE_PEER_PYTHON, else Py's python, whose pins
// are not checked (until Py is made from the lock that pins the peers,
// a parity test skips each case for want of them instead of failing).
// The test is skipped, saying so, when there is no interpreter.
func Peer(t testing.TB) string {
	t.Helper()
	py := os.Getenv("RLPIPE_PEER_PYTHON")
	if py == "" {
		var err error
		if py, err = filepath.Abs(filepath.Join(Py.Dir(Root(t)), "bin", "python")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(py); err != nil {
		t.Skipf("no peer python at %s (set RLPIPE_PEER_PYTHON, or make %s with %s)", py, Py.Name, Py.Script)
	}
	return py
}
