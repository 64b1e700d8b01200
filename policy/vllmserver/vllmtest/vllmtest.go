// Package vllmtest gives tests a real vLLM server on the loopback: the
// venv's Python (skipping the test, saying why, only when there is none),
// a model directory to serve, and servers that stop when the test ends.
package vllmtest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/policy/vllmserver"
)

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
			t.Fatal("vllmtest: no go.mod above the working directory")
		}
		dir = up
	}
}

// Python is the venv's interpreter; the test is skipped when there is no
// venv with vLLM, and fails on any other problem.
func Python(t testing.TB) string {
	t.Helper()
	py, err := vllmserver.Python(Root(t))
	if errors.Is(err, vllmserver.ErrNoVLLM) {
		t.Skipf("skipping the real vLLM: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return py
}

// Model writes a tiny random Llama with a character tokenizer and a LoRA
// adapter for it (scripts/py-smoke/tiny_llama.py) under a temporary
// directory and returns the model's and the adapter's directories.
func Model(t testing.TB, py string) (model, lora string) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(py, filepath.Join(Root(t), "scripts", "py-smoke", "tiny_llama.py"), dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("vllmtest: write the tiny Llama: %v\n%s", err, out)
	}
	return filepath.Join(dir, "model"), filepath.Join(dir, "lora")
}

// Start starts a server with o (Python defaulting to the venv's) and stops
// it when the test ends.
func Start(t testing.TB, o vllmserver.Options) *vllmserver.Server {
	t.Helper()
	if o.Python == "" {
		o.Python = Python(t)
	}
	s, err := vllmserver.Start(context.Background(), &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}
