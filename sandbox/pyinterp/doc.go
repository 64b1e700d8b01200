// Package pyinterp finds a Python interpreter on the host and works out
// what a sandbox must see of it to run it (Find): the command inside, the
// base installation bound read-only at its own paths, a venv mounted at
// VenvMount. A python: key of a reward spec (rewards/python) or of an
// environment (environments/skyrlgym) names one: a venv directory, an
// interpreter, or "" for $RLPIPE_PYTHON, else python3 on PATH. Find asks
// the interpreter once, outside the sandbox, for its prefixes and
// sys.path, and fails with ErrUnreachable when the sandbox's user cannot
// read what it needs:
//
//	in, err := pyinterp.Find(ctx, ".venv-py")
//	spec := sandbox.Spec{Command: []string{in.Command, "-I", "/worker/worker.py"},
//		ReadOnlyBinds: in.Binds, ReadOnlyMounts: in.Mounts}
package pyinterp
