// Package pyvenv finds the project's Python venv for the tests that run
// the real libraries (torch, transformers, PEFT, vLLM, torchrun):
// $RLPIPE_PY_VENV, or .venv-py at the top of the repository, which
// scripts/py-venv.sh makes (make test runs it). A test without the venv
// is skipped, saying how to make it. Test code only: it imports testing
// (policy/vllmserver finds the same venv by the same rule for programs).
package pyvenv

import (
	"os"
	"path/filepath"
	"testing"
)

// Env names the variable that points at another venv.
const Env = "RLPIPE_PY_VENV"

// Dir is the venv's directory for the repository at root: $RLPIPE_PY_VENV
// when set, else root/.venv-py.
func Dir(root string) string {
	if v := os.Getenv(Env); v != "" {
		return v
	}
	return filepath.Join(root, ".venv-py")
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

// Python is the venv's interpreter as an absolute path; the test is
// skipped, saying so and why it wanted it, when there is none.
func Python(t testing.TB, why string) string {
	t.Helper()
	venv, err := filepath.Abs(Dir(Root(t)))
	if err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(venv, "bin", "python")
	if _, err := os.Stat(py); err != nil {
		t.Skipf("no venv at %s: run scripts/py-venv.sh (about 6 GB; make test runs it) to %s", venv, why)
	}
	return py
}
