package python_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/rewards/python"
	"github.com/rlpipe/rlpipe/rewards/python/pythontest"
)

// $RLPIPE_PYTHON is the interpreter where python: is not set: a venv by
// absolute path or relative to the working directory; python: wins over
// it; a path that is no interpreter is an error naming the variable.
func TestEnvPython(t *testing.T) {
	needPython(t)
	venv := pythontest.FakeVenv(t, systemPython)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, venv)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, env, python, command, err string
	}{
		{"a venv", venv, "", "/python/venv/bin/python3", ""},
		{"a venv relative to the working directory", rel, "", "/python/venv/bin/python3", ""},
		{"python: wins", venv, systemPython, systemPython, ""},
		{"missing", "/nonexistent/venv", "", "",
			"RLPIPE_PYTHON=/nonexistent/venv (the interpreter where python: is not set): python /nonexistent/venv: no such venv or interpreter; set python: to a venv directory or an interpreter's path: python interpreter not usable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(python.EnvPython, c.env)
			in, err := python.Find(context.Background(), c.python)
			if c.err != "" {
				if !errors.Is(err, python.ErrInterpreter) || err == nil || err.Error() != c.err {
					t.Fatalf("got  %v\nwant %s", err, c.err)
				}
				return
			}
			if err != nil || in.Command != c.command {
				t.Fatalf("got %+v, %v; want command %s", in, err, c.command)
			}
		})
	}
	// A worker without python: imports from $RLPIPE_PYTHON's venv.
	t.Setenv(python.EnvPython, venv)
	site := pythontest.SitePackages(t, venv, systemPython)
	if err := os.WriteFile(filepath.Join(site, "envrewards.py"),
		[]byte("import sys\ndef prefix(completions, **kw):\n    return [float(sys.prefix == '/python/venv')] * len(completions)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := python.Start(context.Background(), python.Options{Functions: []python.Function{{Name: "prefix", Ref: "envrewards:prefix"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	got, err := w.Score(context.Background(), "prefix", python.Batch{Completions: texts("a")})
	if err != nil || !reflect.DeepEqual(got, []python.Result{ok(1)}) {
		t.Fatalf("got %+v, %v", got, err)
	}
}

// From a project's root, RLPIPE_PYTHON=.venv-py gives a function without
// python: the project venv's packages: math-verify scores here.
func TestEnvPythonProjectVenv(t *testing.T) {
	py := pyvenv.Python(t, "import math-verify through RLPIPE_PYTHON")
	t.Setenv(python.EnvPython, filepath.Dir(filepath.Dir(py)))
	w, err := python.Start(context.Background(), python.Options{Dir: "testdata",
		Functions: []python.Function{{Name: "math_equal", Ref: "venv_fns.py:math_equal"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	got, err := w.Score(context.Background(), "math_equal", python.Batch{Completions: texts("$\\frac{1}{2}$", "3"),
		Columns: map[string][]any{"answer": texts("$0.5$", "$4$")}})
	if want := []python.Result{ok(1), ok(0)}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
}
