package runners_test

import (
	"errors"
	"testing"

	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/python"
)

// A function without python: runs with $RLPIPE_PYTHON, read when the
// spec compiles: one that is no interpreter is an error at the function,
// naming the variable; one that is, is used.
func TestEnvPythonAtPlanTime(t *testing.T) {
	needSystemPython(t)
	const src = "functions:\n  - name: f\n    function: ../python/testdata/fns.py:length\ncomponents:\n  - name: a\n    expr: functions.f\n"
	t.Setenv(python.EnvPython, "/nonexistent/venv")
	_, err := compileSpec(t, src)
	const want = `spec.yaml:2:5: function "f": RLPIPE_PYTHON=/nonexistent/venv (the interpreter where python: is not set): python /nonexistent/venv: no such venv or interpreter; set python: to a venv directory or an interpreter's path: python interpreter not usable`
	if !errors.Is(err, rewards.ErrSpec) || err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
	t.Setenv(python.EnvPython, systemPython)
	if _, err := compileSpec(t, src); err != nil {
		t.Fatalf("with %s=%s: %v", python.EnvPython, systemPython, err)
	}
}
