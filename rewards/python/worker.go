package python

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlpipe/rlpipe/sandbox"
	"github.com/rlpipe/rlpipe/sandbox/pyinterp"
)

//go:embed worker.py
var workerScript []byte

// workerPath is where the worker script is, read-only, in the sandbox.
const workerPath = "/rlpipe-worker/worker.py"

// functionsDir holds, in the sandbox, the directories of the functions'
// files: /rlpipe-functions/0, /rlpipe-functions/1, …
const functionsDir = "/rlpipe-functions"

// Function is one reward function of a spec: the name expressions read
// it by (functions.NAME) and where it is, "path/to/file.py:fn" (a file,
// relative to Options.Dir) or "package.module:fn" (an installed module).
type Function struct {
	Name string
	Ref  string
}

// Options start a Worker.
type Options struct {
	// Python is a venv directory or an interpreter; "" means
	// $RLPIPE_PYTHON when set, else python3 on PATH (see Find).
	Python string
	// Dir is the directory relative file references are read from (the
	// spec's).
	Dir string
	// Functions are the functions the worker imports.
	Functions []Function
	// Limits bound the worker; Wall bounds each batch (zero fields:
	// DefaultLimits' values).
	Limits sandbox.Limits
}

// DefaultLimits are a worker's limits where Options.Limits sets none: a
// batch may take a minute, the worker an hour of CPU time over its life.
var DefaultLimits = sandbox.Limits{Wall: time.Minute, CPUTime: time.Hour, MemoryBytes: 2 << 30}

// Errors of Start and Score, tested with errors.Is.
var (
	// ErrLoad: a function's module does not import, or has no such
	// function. The *LoadError says which and the traceback's last line.
	ErrLoad = errors.New("python reward function does not load")
	// ErrBadRef: a function reference is not "file.py:fn" or "module:fn".
	ErrBadRef = errors.New("bad python function reference")
)

// LoadError is a function that does not load.
type LoadError struct {
	Function Function
	// Reason is the last line of the Python traceback, e.g.
	// "ModuleNotFoundError: No module named 'nope'".
	Reason string
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("function %s (%s): %s", e.Function.Name, e.Function.Ref, e.Reason)
}

func (e *LoadError) Unwrap() error { return ErrLoad }

// Worker is a sandboxed Python process that has imported a spec's
// functions and scores batches of rows with them. It restarts its
// process after a batch that killed it (a hang, an out-of-memory). One
// batch at a time.
type Worker struct {
	opts   Options
	in     Interpreter
	spec   sandbox.Spec
	load   []byte
	proc   *sandbox.Process
	starts int
}

// Start finds the interpreter, starts the worker in a sandbox and imports
// every function. The error is ErrInterpreter's (the python path),
// ErrBadRef, every function that does not load (*LoadError, joined), or
// the sandbox's.
func Start(ctx context.Context, o Options) (*Worker, error) {
	in, err := Find(ctx, o.Python)
	if err != nil {
		return nil, err
	}
	lim := o.Limits
	lim.Wall = cmpOr(lim.Wall, DefaultLimits.Wall)
	lim.CPUTime = cmpOr(lim.CPUTime, DefaultLimits.CPUTime)
	lim.MemoryBytes = cmpOr(lim.MemoryBytes, DefaultLimits.MemoryBytes)
	spec := sandbox.Spec{
		Command:        []string{in.Command, "-I", workerPath},
		ReadOnlyFiles:  map[string][]byte{workerPath: workerScript},
		ReadOnlyBinds:  in.Binds,
		ReadOnlyMounts: maps.Clone(in.Mounts),
		Limits:         lim,
	}
	if spec.ReadOnlyMounts == nil {
		spec.ReadOnlyMounts = map[string]string{}
	}
	refs := map[string]string{}
	dirs := map[string]string{} // host dir → sandbox dir
	paths := []string{}
	for _, f := range o.Functions {
		module, fn, file, err := parseRef(f.Ref)
		if err != nil {
			return nil, fmt.Errorf("function %s: %w", f.Name, err)
		}
		if file != "" {
			host := file
			if !filepath.IsAbs(host) {
				host = filepath.Join(o.Dir, file)
			}
			if _, err := os.Stat(host); err != nil {
				return nil, &LoadError{Function: f, Reason: fmt.Sprintf("no file %s", host)}
			}
			if host, err = filepath.Abs(host); err != nil {
				return nil, &LoadError{Function: f, Reason: err.Error()}
			}
			dir := filepath.Dir(host)
			if uid, gid := sandbox.SandboxUID(); uid != os.Geteuid() {
				if blocker := pyinterp.Unreachable(dir, uid, gid); blocker != "" {
					return nil, &LoadError{Function: f, Reason: fmt.Sprintf("the sandbox's user (uid %d) cannot read %s: %s", uid, dir, blocker)}
				}
			}
			at, ok := dirs[dir]
			if !ok {
				at = functionsDir + "/" + strconv.Itoa(len(dirs))
				dirs[dir] = at
				spec.ReadOnlyMounts[at] = dir
				paths = append(paths, at)
			}
		}
		refs[f.Name] = module + ":" + fn
	}
	load, err := json.Marshal(map[string]any{"op": "load", "paths": paths, "functions": refs})
	if err != nil {
		return nil, fmt.Errorf("encode the load request: %w", err)
	}
	w := &Worker{opts: o, in: in, spec: spec, load: load}
	if err := w.start(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// Spawn starts another worker like w — the same interpreter, functions
// and limits — without looking for the interpreter again: a pool's
// workers are alike even if PATH or $RLPIPE_PYTHON change meanwhile.
func (w *Worker) Spawn(ctx context.Context) (*Worker, error) {
	n := &Worker{opts: w.opts, in: w.in, spec: w.spec, load: w.load}
	if err := n.start(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// parseRef splits "path/to/file.py:fn" or "package.module:fn": the module
// to import, the function, and the file ("" for a module).
func parseRef(ref string) (module, fn, file string, err error) {
	target, fn, ok := strings.Cut(ref, ":")
	if !ok || target == "" || fn == "" || strings.Contains(fn, ":") {
		return "", "", "", fmt.Errorf("%q: want path/to/file.py:function or package.module:function: %w", ref, ErrBadRef)
	}
	if strings.HasSuffix(target, ".py") {
		return strings.TrimSuffix(filepath.Base(target), ".py"), fn, target, nil
	}
	if strings.ContainsAny(target, "/\\") {
		return "", "", "", fmt.Errorf("%q: a file must end in .py: %w", ref, ErrBadRef)
	}
	return target, fn, "", nil
}

// start starts the process and loads the functions.
func (w *Worker) start(ctx context.Context) error {
	p, err := sandbox.Start(context.WithoutCancel(ctx), w.spec)
	if err != nil {
		return fmt.Errorf("start the python worker: %w", err)
	}
	w.proc = p
	w.starts++
	b, err := p.Call(ctx, w.load)
	if err != nil {
		p.Kill()
		r, _ := p.Wait()
		return fmt.Errorf("load the python functions: %v (stderr: %s)", err, lastLine(r.Stderr))
	}
	var a struct {
		Errors map[string]string `json:"errors"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		p.Kill()
		return fmt.Errorf("load the python functions: the worker answered %q: %w", b, err)
	}
	var errs []error
	for _, f := range w.opts.Functions {
		if reason, ok := a.Errors[f.Name]; ok {
			errs = append(errs, &LoadError{Function: f, Reason: reason})
		}
	}
	if len(errs) > 0 {
		p.Kill()
		return errors.Join(errs...)
	}
	return nil
}

// Close ends the worker.
func (w *Worker) Close() {
	if w.proc != nil {
		w.proc.Kill()
	}
}

// Interpreter is the interpreter the worker runs.
func (w *Worker) Interpreter() Interpreter { return w.in }

// Starts is how many processes the worker has started: 1, plus one per
// restart after a batch that killed it.
func (w *Worker) Starts() int { return w.starts }

// Batch is the rows a function scores in one call, TRL's convention:
// completions (text, or a list of messages for an episode), prompts, and
// every other column by name, each a list as long as Completions.
type Batch struct {
	Completions []any
	Prompts     []any
	Columns     map[string][]any
}

// Result is a function's verdict on one row.
type Result struct {
	// Score is the function's value; 0 unless Status is "ok".
	Score float64
	// Status is "ok", "error" (not scored: None, an exception, a bad
	// value, a dead worker) or "nonfinite" (NaN or ±inf).
	Status string
	// Reason says why the row was not scored.
	Reason string
}

// Row statuses of Result, the reward table's.
const (
	StatusOK        = "ok"
	StatusError     = "error"
	StatusNonfinite = "nonfinite"
)

// Score scores b with the function name, in one call. When the call
// raises, each row is scored alone, so only the rows that raise get
// status "error". When the worker dies (a hang past Limits.Wall, out of
// memory, a crash), every row of the batch gets status "error" and the
// worker is restarted for the next batch. The error is non-nil only when
// no verdict exists: ctx ended, or the worker cannot be restarted.
func (w *Worker) Score(ctx context.Context, name string, b Batch) ([]Result, error) {
	n := len(b.Completions)
	out := make([]Result, n)
	if n == 0 {
		return out, nil
	}
	a, err := w.call(ctx, name, b)
	if err != nil {
		return nil, err
	}
	if a.dead != "" {
		return fill(out, Result{Status: StatusError, Reason: a.dead}), nil
	}
	if a.Error != "" && n > 1 {
		for i := range n {
			one := Batch{Completions: b.Completions[i : i+1], Prompts: slice(b.Prompts, i)}
			if len(b.Columns) > 0 {
				one.Columns = map[string][]any{}
				for k, v := range b.Columns {
					one.Columns[k] = slice(v, i)
				}
			}
			r, err := w.Score(ctx, name, one)
			if err != nil {
				return nil, err
			}
			out[i] = r[0]
		}
		return out, nil
	}
	if a.Error != "" {
		return fill(out, Result{Status: StatusError, Reason: fmt.Sprintf("function %s raised %s", name, a.Error)}), nil
	}
	if a.NotList != "" {
		return fill(out, Result{Status: StatusError, Reason: fmt.Sprintf("function %s returned a %s, want a list of %d numbers", name, a.NotList, n)}), nil
	}
	if len(a.Scores) != n {
		return fill(out, Result{Status: StatusError, Reason: fmt.Sprintf("function %s returned %d scores for %d rows", name, len(a.Scores), n)}), nil
	}
	for i, v := range a.Scores {
		out[i] = judge(name, v)
	}
	return out, nil
}

func slice(v []any, i int) []any {
	if i < len(v) {
		return v[i : i+1]
	}
	return nil
}

func fill(out []Result, r Result) []Result {
	for i := range out {
		out[i] = r
	}
	return out
}

// judge turns one value the worker sent into a row's result.
func judge(name string, v json.RawMessage) Result {
	if string(v) == "null" {
		return Result{Status: StatusError, Reason: fmt.Sprintf("function %s returned None: not scored", name)}
	}
	var f float64
	if err := json.Unmarshal(v, &f); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) { // not sent so, but never let one through
			return Result{Status: StatusNonfinite, Reason: fmt.Sprintf("function %s returned %v", name, f)}
		}
		return Result{Score: f, Status: StatusOK}
	}
	var o struct {
		Nonfinite string `json:"nonfinite"`
		Type      string `json:"type"`
		Repr      string `json:"repr"`
	}
	_ = json.Unmarshal(v, &o)
	if o.Nonfinite != "" {
		return Result{Status: StatusNonfinite, Reason: fmt.Sprintf("function %s returned %s", name, o.Nonfinite)}
	}
	return Result{Status: StatusError, Reason: fmt.Sprintf("function %s returned a %s (%s), want a number or None", name, o.Type, o.Repr)}
}

// answer is the worker's answer to a score request; dead says how the
// worker died instead.
type answer struct {
	Scores  []json.RawMessage `json:"scores"`
	Error   string            `json:"error"`
	NotList string            `json:"notlist"`
	dead    string
}

func (w *Worker) call(ctx context.Context, name string, b Batch) (answer, error) {
	if !slices.ContainsFunc(w.opts.Functions, func(f Function) bool { return f.Name == name }) {
		return answer{}, fmt.Errorf("score with function %q: the worker has no such function", name)
	}
	prompts := b.Prompts
	if prompts == nil {
		prompts = make([]any, len(b.Completions))
	}
	columns := b.Columns
	if columns == nil {
		columns = map[string][]any{}
	}
	req, err := json.Marshal(map[string]any{"op": "score", "fn": name, "completions": b.Completions, "prompts": prompts, "columns": columns})
	if err != nil {
		return answer{}, fmt.Errorf("encode a batch for function %s: %w", name, err)
	}
	if w.proc.How() != "" {
		// Killed when an earlier call's ctx ended: not this batch's doing.
		if err := w.start(ctx); err != nil {
			return answer{}, fmt.Errorf("restart the python worker after a canceled batch: %w", err)
		}
	}
	line, err := w.proc.Call(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return answer{}, err
		}
		r, _ := w.proc.Wait()
		how := w.proc.How()
		if r.Status == sandbox.StatusMemory {
			how = "out of " + how // "out of memory (memory limit 512 MiB)"
		}
		dead := fmt.Sprintf("function %s: the worker ended: %s; restarted", name, how)
		if err := w.start(ctx); err != nil {
			return answer{}, fmt.Errorf("restart the python worker after %s: %w", dead, err)
		}
		return answer{dead: dead}, nil
	}
	var a answer
	if err := json.Unmarshal(line, &a); err != nil {
		return answer{}, fmt.Errorf("read the worker's answer for function %s (%q): %w", name, line, err)
	}
	return a, nil
}
