// Package vllmtest gives tests a real vLLM server on the loopback: the
// venv's Python (skipping the test, saying why, only when there is none),
// a model directory to serve, and servers that stop when the test ends.
package vllmtest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/policy/embedded"
	"github.com/rlpipe/rlpipe/policy/vllmserver"
)

// Root is the repository's top directory.
func Root(t testing.TB) string { return pyvenv.Root(t) }

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

// Export writes the embedded model (tiny-arith or tiny-chain) as a
// Hugging Face model directory, as `rlpipe policy export` does, and
// returns it: what vLLM serves when it samples for the embedded trainer.
func Export(t testing.TB, model string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), model)
	m, err := embedded.Load(model)
	if err != nil {
		t.Fatalf("vllmtest: export %s: %v", model, err)
	}
	if err := m.ExportHF(dir); err != nil {
		t.Fatalf("vllmtest: export %s to %s: %v", model, dir, err)
	}
	return dir
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

// Served is a model a server lists at GET /v1/models: the base model, or
// a LoRA adapter whose Root is the base's path.
type Served struct {
	ID   string `json:"id"`
	Root string `json:"root"`
}

// Models lists what the server at url (http://127.0.0.1:PORT) serves.
func Models(t testing.TB, url string) []Served {
	t.Helper()
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []Served `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatalf("vllmtest: list the models of %s: %v", url, err)
	}
	return list.Data
}
