package python

import (
	"context"
	"strings"

	"github.com/rlpipe/rlpipe/sandbox/pyinterp"
)

// Interpreter is a Python interpreter found on the host and what a
// sandbox must see of it (sandbox/pyinterp, which finds it).
type Interpreter = pyinterp.Interpreter

// VenvMount is where a venv is seen inside the sandbox.
const VenvMount = pyinterp.VenvMount

// EnvPython names the variable that gives the interpreter of a function
// without python: (pyinterp.EnvPython).
const EnvPython = pyinterp.EnvPython

// Errors of Find, tested with errors.Is (pyinterp's).
var (
	ErrInterpreter = pyinterp.ErrInterpreter
	ErrUnreachable = pyinterp.ErrUnreachable
)

// Find finds the interpreter that path names (pyinterp.Find).
func Find(ctx context.Context, path string) (Interpreter, error) { return pyinterp.Find(ctx, path) }

// InterpreterIn is the interpreter path names without asking it anything
// (pyinterp.InterpreterIn).
func InterpreterIn(path string) (string, error) { return pyinterp.InterpreterIn(path) }

// lastLine is the last non-empty line of s: a traceback's exception.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
