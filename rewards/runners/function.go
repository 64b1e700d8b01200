package runners

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/python"
	"github.com/rlpipe/rlpipe/sandbox"
)

// functionOptions gives each Python function of spec its BatchFunc: a
// pool of sandboxed workers per interpreter and limits, shared by the
// functions that name them, as many as the most any of them asks for
// (workers:, default 1).
// It is the plan-time check too: the pool's first worker is started here,
// which finds the interpreter and imports every function, and a problem
// is a *rewards.SpecError at the function's line and column. The others
// start when a batch first needs them. The pool then serves the scoring,
// until the program is garbage or rlpipe exits.
func functionOptions(spec *rewards.Spec) ([]rewards.Option, error) {
	if len(spec.Functions) == 0 {
		return nil, nil
	}
	dir := filepath.Dir(spec.Name)
	type poolKey struct {
		python string
		limits rewards.FunctionLimits
	}
	byPython := map[poolKey]*pool{}
	var order []poolKey
	for _, f := range spec.Functions {
		py := f.Python
		if py != "" && !filepath.IsAbs(py) {
			py = filepath.Join(dir, py)
		}
		key := poolKey{py, f.Limits}
		p := byPython[key]
		if p == nil {
			p = newPool(python.Options{Python: py, Dir: dir, Limits: sandbox.Limits{
				Wall: f.Limits.Wall, CPUTime: f.Limits.CPUTime, MemoryBytes: f.Limits.MemoryMB << 20}})
			byPython[key] = p
			order = append(order, key)
		}
		p.h.opts.Functions = append(p.h.opts.Functions, python.Function{Name: f.Name, Ref: f.Function})
		p.decl = append(p.decl, f)
		p.h.size = max(p.h.size, f.Workers)
	}
	// On an error, the workers already started end now, not when a
	// garbage collection finds their pools.
	closeAll := func() {
		for _, py := range order {
			byPython[py].h.close()
		}
	}
	var errs []error
	for _, py := range order {
		if err := byPython[py].start(context.Background()); err != nil {
			errs = append(errs, byPython[py].specErrors(spec.Name, err)...)
		}
	}
	if len(errs) > 0 {
		closeAll()
		return nil, errors.Join(errs...)
	}
	var opts []rewards.Option
	for _, py := range order {
		p := byPython[py]
		for _, f := range p.decl {
			fn, err := p.batchFunc(f)
			if err != nil {
				closeAll()
				return nil, err
			}
			opts = append(opts, rewards.WithFunction(f.Name, fn))
		}
	}
	return opts, nil
}

// pool is the workers of one interpreter. Its holder is what a cleanup
// closes when the program that holds the pool's functions is garbage.
type pool struct {
	h    *holder
	decl []rewards.PyFunction
}

// holder keeps the workers. A batch takes the workers it needs from
// idle, all at once, and gives them back when it is scored.
type holder struct {
	opts   python.Options
	size   int            // the most workers a function asks for; 0 is 1
	idle   chan *slot     // the workers not scoring, size of them in all
	taking chan struct{}  // one taker at a time (see take)
	ver    string         // the interpreter's version, for memo keys
	first  *python.Worker // the plan-time worker, which the others copy
	all    []*slot        // every slot, for close
	mu     sync.Mutex     // guards the slots' workers against close
}

// slot is one worker of the pool, nil until a batch first needs it (or
// while its start fails).
type slot struct{ w *python.Worker }

func newPool(o python.Options) *pool {
	p := &pool{h: &holder{opts: o}}
	runtime.AddCleanup(p, func(h *holder) { h.close() }, p.h)
	return p
}

func (h *holder) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.all {
		if s.w != nil {
			s.w.Close()
			s.w = nil
		}
	}
}

// start starts the pool's first worker, which imports every function:
// the plan-time check. The other slots start empty.
func (p *pool) start(ctx context.Context) error {
	h := p.h
	w, err := python.Start(ctx, h.opts)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ver, h.first = w.Interpreter().Version, w
	h.idle = make(chan *slot, max(h.size, 1))
	h.taking = make(chan struct{}, 1)
	for i := range cap(h.idle) {
		s := &slot{}
		if i == 0 {
			s.w = w
		}
		h.all = append(h.all, s)
		h.idle <- s
	}
	return nil
}

// score scores b with function name in n contiguous chunks (n is the
// function's workers, at most one per row), each on a worker of its own,
// at once; the results are in b's order, whichever chunk ends first. A
// chunk's worker that dies restarts alone (Worker.Score). With n ≤ 1 it
// is one call on one worker, as before pools.
func (h *holder) score(ctx context.Context, name string, n int, b python.Batch) ([]python.Result, error) {
	rows := len(b.Completions)
	n = min(max(n, 1), rows)
	if n == 0 {
		return nil, nil
	}
	slots, err := h.take(ctx, n)
	if err != nil {
		return nil, err
	}
	defer h.give(slots)
	if n == 1 {
		return h.scoreOn(ctx, slots[0], name, b)
	}
	out := make([]python.Result, rows)
	var g errgroup.Group // not WithContext: one chunk's error must not kill the others' workers
	for i, s := range slots {
		lo, hi := i*rows/n, (i+1)*rows/n
		g.Go(func() error {
			res, err := h.scoreOn(ctx, s, name, chunk(b, lo, hi))
			if err != nil {
				return err
			}
			copy(out[lo:hi], res)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// take takes n idle workers, in the order they were given back. Takers
// queue: a batch waiting for its second worker holds the only turn, so
// two batches never each hold one worker while waiting for the other's.
func (h *holder) take(ctx context.Context, n int) ([]*slot, error) {
	wait := func() error { return fmt.Errorf("wait for %d python workers: %w", n, ctx.Err()) }
	select {
	case h.taking <- struct{}{}:
	case <-ctx.Done():
		return nil, wait()
	}
	defer func() { <-h.taking }()
	got := make([]*slot, 0, n)
	for len(got) < n {
		select {
		case s := <-h.idle:
			got = append(got, s)
		case <-ctx.Done():
			h.give(got)
			return nil, wait()
		}
	}
	return got, nil
}

func (h *holder) give(slots []*slot) {
	for _, s := range slots {
		h.idle <- s
	}
}

// scoreOn scores b on s's worker, starting it, like the plan-time one,
// if it has none.
func (h *holder) scoreOn(ctx context.Context, s *slot, name string, b python.Batch) ([]python.Result, error) {
	if s.w == nil {
		w, err := h.first.Spawn(ctx)
		if err != nil {
			return nil, err
		}
		h.mu.Lock()
		s.w = w
		h.mu.Unlock()
	}
	return s.w.Score(ctx, name, b)
}

// chunk is rows lo to hi of b.
func chunk(b python.Batch, lo, hi int) python.Batch {
	c := python.Batch{Completions: b.Completions[lo:hi]}
	if b.Prompts != nil {
		c.Prompts = b.Prompts[lo:hi]
	}
	if b.Columns != nil {
		c.Columns = make(map[string][]any, len(b.Columns))
		for k, v := range b.Columns {
			c.Columns[k] = v[lo:hi]
		}
	}
	return c
}

// specErrors turns a start error into spec errors: a function that does
// not load at its entry, an interpreter problem at each python key.
func (p *pool) specErrors(file string, err error) []error {
	var out []error
	at := func(f rewards.PyFunction, key string, msg string) {
		pos, ok := f.Keys[key]
		if !ok {
			pos = f.Pos
		}
		out = append(out, &rewards.SpecError{File: file, Line: pos.Line, Column: pos.Column, Msg: msg})
	}
	var loads []*python.LoadError
	for _, e := range flatten(err) {
		if le := (*python.LoadError)(nil); errors.As(e, &le) {
			loads = append(loads, le)
		}
	}
	if len(loads) == 0 {
		for _, f := range p.decl {
			at(f, "python", fmt.Sprintf("function %q: %v", f.Name, err))
		}
		return out
	}
	for _, le := range loads {
		for _, f := range p.decl {
			if f.Name == le.Function.Name {
				at(f, "function", fmt.Sprintf("function %q (%s): %s", f.Name, f.Function, le.Reason))
			}
		}
	}
	return out
}

// flatten lists the errors errors.Join joined in err, or err.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// batchFunc is f through the pool's worker, memoized row by row when f
// is pure.
//
// The functions hold p, not only its holder: the worker is closed once
// they (the program) are garbage, never while they may run.
func (p *pool) batchFunc(f rewards.PyFunction) (rewards.BatchFunc, error) {
	code := ""
	if file, _, ok := strings.Cut(f.Function, ":"); ok && strings.HasSuffix(file, ".py") {
		path := file
		if !filepath.IsAbs(path) {
			path = filepath.Join(p.h.opts.Dir, file)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read python function %s: %w", f.Name, err)
		}
		sum := sha256.Sum256(b)
		code = "sha256:" + hex.EncodeToString(sum[:])
	}
	score := func(ctx context.Context, b python.Batch) ([]python.Result, error) {
		return p.h.score(ctx, f.Name, f.Workers, b)
	}
	return func(ctx context.Context, rows []rewards.Row, memo rewards.Memoizer) ([]rewards.FunctionResult, error) {
		inputs := make([]rowInput, len(rows))
		for i, r := range rows {
			inputs[i] = inputOf(r).as(f)
		}
		out := make([]rewards.FunctionResult, len(rows))
		todo := make([]int, 0, len(rows))
		keys := make([]memoKey, len(rows))
		for i := range rows {
			if !f.Pure || memo == nil {
				todo = append(todo, i)
				continue
			}
			keys[i] = memoKey{Function: f.Name, Ref: f.Function, Code: code, Python: p.h.ver, Input: inputs[i]}
			hit, err := lookUp(ctx, memo, keys[i], &out[i])
			if err != nil {
				return nil, err
			}
			if !hit {
				todo = append(todo, i)
			}
		}
		if len(todo) == 0 {
			return out, nil
		}
		var b python.Batch
		b.Columns = map[string][]any{}
		for _, i := range todo {
			in := inputs[i]
			b.Completions = append(b.Completions, in.Completion)
			b.Prompts = append(b.Prompts, in.Prompt)
			for k, v := range in.Columns {
				b.Columns[k] = append(b.Columns[k], v)
			}
		}
		res, err := score(ctx, b)
		if err != nil {
			return nil, err
		}
		for j, i := range todo {
			out[i] = rewards.FunctionResult{Value: res[j].Score, Status: res[j].Status, Reason: res[j].Reason}
			if f.Pure && memo != nil && res[j].Status != python.StatusError {
				// A row that was not scored (a dead worker, an exception)
				// is tried again next time; a value is recorded.
				r := out[i]
				if err := memo.Memo(ctx, keys[i], &out[i], func(context.Context) (any, error) { return r, nil }); err != nil {
					return nil, err
				}
			}
		}
		return out, nil
	}, nil
}

// errMiss ends a memo look-up that found no record; it is not permanent,
// so it is never recorded.
var errMiss = errors.New("no memo record")

// lookUp reads key's record into out, reporting whether there was one.
func lookUp(ctx context.Context, memo rewards.Memoizer, key memoKey, out *rewards.FunctionResult) (bool, error) {
	err := memo.Memo(ctx, key, out, func(context.Context) (any, error) { return nil, errMiss })
	switch {
	case errors.Is(err, errMiss):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// memoKey is what decides a pure function's value on a row: the
// function, its file's code, the interpreter's version and the row's
// inputs.
type memoKey struct {
	Function string   `json:"python_function"`
	Ref      string   `json:"ref"`
	Code     string   `json:"code,omitempty"`
	Python   string   `json:"python"`
	Input    rowInput `json:"input"`
}

// rowInput is what a function receives of a row, TRL's convention: the
// completion (text, or an episode's turns as messages), the prompt (text,
// or its messages), and the other columns by name.
type rowInput struct {
	Completion any            `json:"completion"`
	Prompt     any            `json:"prompt"`
	Columns    map[string]any `json:"columns"`
}

func inputOf(r rewards.Row) rowInput {
	t := &r.Trajectory
	var completion any = t.Completion
	if t.EnvOutcome != nil && len(t.Turns) > 0 {
		msgs := make([]map[string]string, len(t.Turns))
		for i, tu := range t.Turns {
			msgs[i] = map[string]string{"role": tu.Role, "content": tu.Content}
		}
		completion = msgs
	}
	var prompt any = r.Prompt.Prompt
	if len(r.Prompt.Messages) > 0 {
		prompt = messagesOf(r.Prompt.Messages)
	}
	return rowInput{Completion: completion, Prompt: prompt, Columns: r.Columns()}
}

// as is in what f asks for: TRL's conversational format, and the
// columns it names under other keywords.
func (in rowInput) as(f rewards.PyFunction) rowInput {
	if f.Conversational {
		if s, ok := in.Completion.(string); ok {
			in.Completion = []map[string]string{{"role": "assistant", "content": s}}
		}
		if s, ok := in.Prompt.(string); ok {
			in.Prompt = []map[string]string{{"role": "user", "content": s}}
		}
	}
	if len(f.Columns) > 0 {
		cols := make(map[string]any, len(in.Columns)+len(f.Columns))
		for k, v := range in.Columns {
			cols[k] = v
		}
		for kw, col := range f.Columns {
			if field, ok := strings.CutPrefix(col, "metadata."); ok {
				cols[kw] = in.Columns["metadata"].(map[string]any)[field] // nil when absent
				continue
			}
			cols[kw] = in.Columns[col]
		}
		in.Columns = cols
	}
	return in
}

func messagesOf(ms []tables.Message) []map[string]string {
	out := make([]map[string]string, len(ms))
	for i, m := range ms {
		out[i] = map[string]string{"role": m.Role, "content": m.Content}
	}
	return out
}
