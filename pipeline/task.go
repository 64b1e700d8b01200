package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// Func is the body of a Go task. It reads its inputs from local files
// (tc.InputPath), writes its outputs to local files (tc.OutputPath), and
// returns nil on success. The engine uploads the outputs when it returns.
type Func func(ctx context.Context, tc *TaskContext) error

// Output declares one artifact a task writes.
type Output struct {
	// Name identifies the output to templates ({{outputs.NAME}}) and to
	// downstream tasks (node.Output(NAME)).
	Name string
	// File is the name under the call's output directory (default: Name).
	File string
	// Dir marks a directory output (an adapter): every file under it is
	// uploaded.
	Dir bool
	// Check validates the written file (e.g. a Parquet schema); an error
	// fails the attempt with ErrOutput.
	Check func(path string) error
}

// TableOutput is an output that holds one table of t's schema, checked
// when the task has written it, so that a bad file fails the attempt
// (ErrOutput) instead of the stage that reads it.
func TableOutput[T any](name, file string, t *tables.Table[T]) Output {
	return Output{Name: name, File: file, Check: func(path string) error { return tables.CheckFile(path, t) }}
}

// GenerateTask is a task of the generate slot: run writes the
// trajectories table (runs.TrajectoriesFile), whose schema is checked
// when it is written. The rollout and episodes stages both return one.
func GenerateTask(name, version, env string, run Func) *Task {
	return &Task{Name: name, Version: version, Env: env, Run: run,
		Outputs: []Output{TableOutput(OutTrajectories, runs.TrajectoriesFile, tables.Trajectories)}}
}

func (o Output) file() string {
	if o.File != "" {
		return o.File
	}
	return o.Name
}

// Task is a unit of work: a Go function or an external command, with
// declared outputs. Tasks are values; a Call runs one in an iteration.
type Task struct {
	Name    string
	Version string
	// Env names the task environment (resources, retries, cache...).
	Env string
	// Run is the Go body; Command is the alternative, an argv whose
	// elements may hold {{inputs.X}}, {{outputs.X}}, {{params.X}},
	// {{attempt}}, {{seed}}, {{iteration}} and {{workdir}}.
	Run     Func
	Command []string
	Outputs []Output
	// IgnoreInputs are inputs that do not enter the cache key (a log
	// file, a checkpoint used only for speed).
	IgnoreInputs []string
	// Settings override the environment's for this task.
	Settings Settings
	// Deterministic declares that the outputs depend only on the inputs
	// and parameters: the task does not read TaskContext.Seed (which is
	// then 0), and its results are shared across iterations and across
	// runs with other seeds. Otherwise the seed enters the cache key.
	Deterministic bool
	// Bookkeeping marks the engine's own light steps over what the store
	// holds — the dataset sampler, a reward spec of expressions alone, the
	// advantages, the training health: milliseconds of CPU, no device,
	// nothing an environment provides.
	// The run executes them in its own process whatever its Executor, as
	// the local executor does, so that an executor on other machines
	// spends no round trips on them: on Temporal, the driver runs them.
	// Their environment's retries, timeouts and concurrency apply; its
	// resources, perhaps sized for other hosts, are cut to this machine's
	// without GPUs.
	Bookkeeping bool
}

func (t *Task) validate() error {
	switch {
	case t.Name == "":
		return fmt.Errorf("%w: a task needs a name", ErrConfig)
	case (t.Run == nil) == (len(t.Command) == 0):
		return fmt.Errorf("%w: task %s needs exactly one of Run or Command", ErrConfig, t.Name)
	}
	seen := map[string]bool{}
	for _, o := range t.Outputs {
		if o.Name == "" || seen[o.Name] {
			return fmt.Errorf("%w: task %s: output names must be unique and non-empty", ErrConfig, t.Name)
		}
		seen[o.Name] = true
	}
	return nil
}

// Call is one use of a task in an iteration.
type Call struct {
	// Inputs are artifacts in the store or outputs of other nodes.
	Inputs map[string]Artifact
	// Params are JSON-encodable settings of the call; they enter the key.
	Params any
	// Override is the per-call layer of settings (over env and task).
	Override Settings
	// Dir is where outputs go on the run branch (default: the
	// iteration's directory, iterations/NNNNNN).
	Dir string
	// Name distinguishes two calls of one task in one iteration (default:
	// the task name); it labels events and the cache key's caller.
	Name string
	// After orders the call behind another node: once its inputs are
	// ready and the cache has missed, it waits until After has started
	// an attempt, hit the cache or ended before going to the executor.
	// Loop uses it so that generations take the generator in iteration
	// order. It does not enter the cache key.
	After *Node
}

// Artifact is an object (or directory) in the store, or the promise of
// one: the output of a node that has not finished.
type Artifact struct {
	Ref      string `json:"ref"`
	Path     string `json:"path"`
	Checksum string `json:"checksum,omitempty"`
	Dir      bool   `json:"dir,omitempty"`
	// Files lists a directory's files (relative path → checksum).
	Files map[string]string `json:"files,omitempty"`

	node   *Node
	output string
}

// StoreArtifact names an existing object REF:PATH.
func StoreArtifact(ref, path string) Artifact { return Artifact{Ref: ref, Path: path} }

// StoreDir names an existing directory REF:PATH/ (all objects under it).
func StoreDir(ref, path string) Artifact { return Artifact{Ref: ref, Path: path, Dir: true} }

// digest is what the artifact contributes to a cache key.
func (a Artifact) digest() (string, error) {
	if !a.Dir {
		return a.Checksum, nil
	}
	pairs := [][2]string{}
	for _, n := range slices.Sorted(maps.Keys(a.Files)) {
		pairs = append(pairs, [2]string{n, a.Files[n]})
	}
	b, err := json.Marshal(pairs)
	if err != nil {
		return "", fmt.Errorf("digest of directory %s:%s: encode its file list: %w", a.Ref, a.Path, err)
	}
	return digestBytes(b), nil
}

// TaskContext is what a running task sees.
type TaskContext struct {
	// Task is the call's name; Group labels its iteration ("iteration
	// 000003") and Stage its stage.
	Task, Group string
	// Iteration is the iteration number (0 outside iterations).
	Iteration int
	// Attempt counts from 1.
	Attempt int
	// Seed is deterministic per run seed, iteration and call name.
	Seed uint64

	// work is the attempt's scratch directory (see WorkDir).
	work *workDir

	// memoCaller namespaces Memo's records: the task's name, not its
	// version, so a new version (a new reward spec) still replays the
	// calls whose key — which must describe the call fully — it repeats.
	memoCaller string

	inputs  map[string]string
	outputs map[string]string
	params  json.RawMessage
	memo    *memoizer
	warm    *warmSlot
	log     zerolog.Logger
}

// WorkDir returns a scratch directory private to this attempt, removed
// when the attempt ends. A task with inputs, outputs or a command has it
// from the start; for a Go task with none of those it is made on the
// first call, so that a task that needs no files costs no directory.
func (tc *TaskContext) WorkDir() (string, error) { return tc.work.path() }

// InputPath returns the local path of an input (a directory for
// directory inputs).
func (tc *TaskContext) InputPath(name string) string { return tc.inputs[name] }

// OutputPath returns where the task writes an output.
func (tc *TaskContext) OutputPath(name string) string { return tc.outputs[name] }

// ReadInput reads an input table. A missing input or a table that does
// not decode is Permanent (retrying reads the same bytes); a file-system
// error is not.
func ReadInput[T any](tc *TaskContext, input string, t *tables.Table[T]) ([]T, error) {
	path := tc.InputPath(input)
	if path == "" {
		return nil, Permanent(fmt.Errorf("task %s: no %q input", tc.Task, input))
	}
	rows, err := tables.ReadFile(path, t)
	var pathErr *fs.PathError
	switch {
	case errors.As(err, &pathErr):
		return nil, fmt.Errorf("read %s: %w", input, err)
	case err != nil:
		return nil, Permanent(fmt.Errorf("read %s: %w", input, err))
	}
	return rows, nil
}

// Params decodes the call's parameters into v.
func (tc *TaskContext) Params(v any) error {
	if len(tc.params) == 0 || string(tc.params) == "null" {
		return nil
	}
	if err := json.Unmarshal(tc.params, v); err != nil {
		return Permanent(fmt.Errorf("task %s: decode params: %w", tc.Task, err))
	}
	return nil
}

// Logger is the task's logger, with run, iteration and task fields.
func (tc *TaskContext) Logger() zerolog.Logger { return tc.log }

// Warm returns state kept between calls of tasks in an environment with
// reuse on (a loaded model): init runs once per warm worker. Without
// reuse, init runs on every call.
func (tc *TaskContext) Warm(init func() (any, error)) (any, error) {
	if tc.warm == nil {
		return init()
	}
	if tc.warm.state == nil {
		s, err := init()
		if err != nil {
			return nil, err
		}
		tc.warm.state = s
	}
	return tc.warm.state, nil
}

// Memoizer records a call's result (or its permanent error) under a key
// and replays it instead of calling again: what a paid call (a judge, a
// verifier) is given so that it is made once. *TaskContext is one.
type Memoizer interface {
	Memo(ctx context.Context, key any, out any, fn func(ctx context.Context) (any, error)) error
}

var _ Memoizer = (*TaskContext)(nil)

// Memo runs fn at most once per distinct key for tasks of this name (any
// version, any run of the repository), so key must describe the call
// completely (a judge's model, rubric and messages): the result
// (JSON-encoded into out) or its permanent error is recorded in the store
// the moment fn returns, and a retry or a resumed run replays the record
// instead of calling fn again. Errors not marked Permanent are not
// replayed: the next attempt calls fn again.
func (tc *TaskContext) Memo(ctx context.Context, key any, out any, fn func(ctx context.Context) (any, error)) error {
	return tc.memo.call(ctx, tc, key, out, fn)
}

func outputPaths(work string, outs []Output) map[string]string {
	m := make(map[string]string, len(outs))
	for _, o := range outs {
		m[o.Name] = filepath.Join(work, "out", o.file())
	}
	return m
}
