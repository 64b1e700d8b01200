// Package python runs reward functions written in Python, with TRL's
// signature, in a long-lived sandboxed worker (sandbox.Start):
//
//	def accuracy(completions, prompts, **columns) -> list[float | None]: ...
//
// Start finds the interpreter (Find: a venv directory or an interpreter,
// $RLPIPE_PYTHON or python3 on PATH when none is given,
// asked once, outside the sandbox, for its prefixes and sys.path, so the
// sandbox binds exactly those read-only; a venv is mounted at
// /python/venv), starts the embedded worker.py in a sandbox (no network,
// a read-only root, the sandbox's limits) and imports every function:
// "path/to/file.py:fn" (the file's directory mounted read-only) or
// "package.module:fn" (installed in the interpreter). A function that
// does not import is a *LoadError with the traceback's last line.
//
//	w, err := python.Start(ctx, python.Options{Python: ".venv", Dir: specDir,
//		Functions: []python.Function{{Name: "accuracy", Ref: "rewards.py:accuracy"}}})
//	results, err := w.Score(ctx, "accuracy", python.Batch{Completions: …, Prompts: …,
//		Columns: map[string][]any{"answer": …}})
//
// Score calls the function once per batch, fn(completions=…, prompts=…,
// **columns), and judges each value in Go: a finite number is the row's
// score; None is status "error" (not scored); NaN or ±inf is status
// "nonfinite"; anything else, or a list of the wrong length, is status
// "error" with a reason naming the function. A batch that raises is
// scored again row by row, so only the rows that raise get status
// "error". A batch that kills the worker (no answer within Limits.Wall,
// out of memory, a crash) gives each of its rows status "error" saying
// how, and the worker restarts for the next batch.
//
// docs/REWARDS.md ("Python functions") has the design choices.
package python
