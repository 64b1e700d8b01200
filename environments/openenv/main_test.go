package openenv_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rlpipe/rlpipe/environments/openenv"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
)

// The example's server (examples/openenv, on the real openenv package)
// starts once for the package: every test that plays it uses the same
// options, so the same shared Remote, and TestMain stops it.
var example struct {
	once sync.Once
	opts *openenv.Options
	r    *openenv.Remote
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if example.r != nil {
		example.r.Close()
	}
	os.Exit(code)
}

// venv is the openenv venv's directory (the test skips without it).
func venv(t *testing.T) string {
	t.Helper()
	return filepath.Dir(filepath.Dir(pyvenv.OpenEnv.Python(t, "serve OpenEnv environments")))
}

// exampleOptions are the rl_options that serve the shipped example, and
// its Remote, started (once).
func exampleOptions(t *testing.T) (*openenv.Options, *openenv.Remote) {
	t.Helper()
	py := venv(t)
	example.once.Do(func() {
		dir, err := filepath.Abs("../../examples/openenv")
		if err != nil {
			example.err = err
			return
		}
		example.opts = &openenv.Options{Serve: &openenv.ServeOptions{App: "arith_env.server:app", Python: py, Cwd: dir}}
		example.r, example.err = openenv.SharedRemote(example.opts, "")
		if example.err == nil {
			example.err = example.r.Start(t.Context())
		}
	})
	if example.err != nil {
		t.Fatal(example.err)
	}
	return example.opts, example.r
}
