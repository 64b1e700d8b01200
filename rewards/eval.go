package rewards

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	"golang.org/x/sync/errgroup"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// source gives the value of variable k for row i of whatever is being
// scored: a record batch's columns, or one Row. strVar and intVar give the
// values of string and int variables unboxed, for native plans, with
// ok = false when value would not be a plain value (a missing prompt).
type source interface {
	value(k, i int) ref.Val
	strVar(k, i int) (string, bool)
	intVar(k, i int) (int64, bool)
}

// activation resolves the variables of one row. One is made per worker
// and moved from row to row: nothing is allocated per row but the values
// themselves, each made once per row however many expressions read it.
type activation struct {
	src   source
	row   int
	valid varSet
	cache [numVars]ref.Val
	// comps and vals are the component values, visible to the total.
	comps []compiled
	vals  []float64
	// marks are the markers of the row's value of variable marked-1
	// (0: none yet), shared by the native plans that search it.
	marks  textMarks
	marked int
}

var _ interpreter.Activation = (*activation)(nil)

func (a *activation) at(src source, row int) {
	a.src, a.row, a.valid, a.comps, a.marked = src, row, 0, nil, 0
}

// marksOf returns the markers of s, the row's value of string variable
// k, scanning it on first use in the row.
func (a *activation) marksOf(k int, s string) *textMarks {
	if a.marked != k+1 {
		a.marks.scan(s)
		a.marked = k + 1
	}
	return &a.marks
}

func (a *activation) ResolveName(name string) (any, bool) {
	k := varIndex(name)
	if k < 0 {
		for j := range a.comps {
			if a.comps[j].name == name {
				return types.Double(a.vals[j]), true
			}
		}
		return nil, false
	}
	if a.valid.has(k) {
		return a.cache[k], true
	}
	v := a.src.value(k, a.row)
	a.cache[k] = v
	a.valid |= 1 << k
	return v, true
}

func (a *activation) Parent() interpreter.Activation { return nil }

// fault is why a row is not scored: its status (StatusError, or
// StatusNonfinite for a reward that came out NaN or infinite) and a
// message naming the part that failed and why. The zero fault is none.
type fault struct{ status, msg string }

func failed(msg string) fault { return fault{StatusError, msg} }

// nonfinite is the fault of a part whose value v is NaN or infinite.
func nonfinite(part string, v float64) fault {
	return fault{StatusNonfinite, fmt.Sprintf("%s: the value is %v", part, v)}
}

// evalRow computes the components and the total of the activation's row.
// vals receives the component values. On failure f says which part
// failed and why.
func (p *Program) evalRow(a *activation, vals []float64) (total float64, f fault) {
	for j := range p.comps {
		c := &p.comps[j]
		if c.native != nil {
			if v, ok := c.native(a); ok {
				vals[j] = v
				total += c.weight * v
				continue
			}
		}
		out, _, err := c.prg.Eval(a)
		if err != nil {
			return 0, failed("component " + c.name + ": " + p.missingKey(a, err.Error()))
		}
		v, bad := toFloat(out)
		switch {
		case bad != "":
			return 0, failed("component " + c.name + ": " + bad)
		case !tables.Finite(v):
			return 0, nonfinite("component "+c.name, v)
		}
		vals[j] = v
		total += c.weight * v
	}
	if p.total == nil {
		if !tables.Finite(total) {
			return 0, fault{StatusNonfinite, "total: the weighted sum is " + fmt.Sprint(total)}
		}
		return total, fault{}
	}
	a.comps, a.vals = p.comps, vals
	out, _, err := p.total.prg.Eval(a)
	a.comps = nil
	if err != nil {
		return 0, failed("total: " + p.missingKey(a, err.Error()))
	}
	total, bad := toFloat(out)
	switch {
	case bad != "":
		return 0, failed("total: " + bad)
	case !tables.Finite(total):
		return 0, nonfinite("total", total)
	}
	return total, fault{}
}

// toFloat reads an expression's result as a reward value.
func toFloat(v ref.Val) (float64, string) {
	var f float64
	switch x := v.(type) {
	case types.Double:
		f = float64(x)
	case types.Int:
		f = float64(x)
	case types.Uint:
		f = float64(x)
	case types.Bool:
		if x {
			f = 1
		}
	default:
		return 0, fmt.Sprintf("the value is a %s, not a number", v.Type().(ref.Type).TypeName())
	}
	return f, ""
}

// Prompts is the prompts table indexed by prompt_id, joined to
// trajectories when scoring. Safe for concurrent use.
type Prompts struct {
	m map[string]*promptEntry
	n int // rows indexed so far, while indexing
	// ready is closed once a table read in the background is indexed
	// (nil when it was indexed before the Prompts was returned); err is
	// then why reading it failed.
	ready chan struct{}
	err   error
	// cols are the prompts table's columns read (nil: all of them).
	cols []string
}

type promptEntry struct {
	p tables.Prompt
	// prompt and answer are boxed once, not once per sample.
	prompt, answer ref.Val
	// next is the entry of the prompts table's next row: trajectories
	// usually come in the order of their prompts, and following next is
	// cheaper than a lookup in a large map.
	next *promptEntry
	// Parsed forms, made on first use and shared by the prompt's samples.
	metaOnce, msgOnce sync.Once
	meta, msgs        ref.Val
	// rowMeta is the metadata as the variable row holds it (metadataMap).
	rowMetaOnce sync.Once
	rowMeta     map[string]any
}

// NewPrompts indexes prompt rows by prompt_id. Two rows with one id are
// an error.
func NewPrompts(rows []tables.Prompt) (*Prompts, error) {
	entries := make([]promptEntry, len(rows))
	for i := range rows {
		entries[i].set(rows[i])
	}
	return indexPrompts(entries)
}

// indexPrompts indexes entries, in row order, by prompt_id.
func indexPrompts(parts ...[]promptEntry) (*Prompts, error) {
	n := 0
	for _, es := range parts {
		n += len(es)
	}
	p := &Prompts{m: make(map[string]*promptEntry, n)}
	var prev *promptEntry
	for _, es := range parts {
		for i := range es {
			e := &es[i]
			// One map operation per row: a duplicate leaves the map one
			// short (and the index is not returned).
			p.m[e.p.PromptID] = e
			if len(p.m) != i+1+p.n {
				return nil, fmt.Errorf("index prompts: prompt_id %q appears twice (rows must be unique by prompt_id)", e.p.PromptID)
			}
			if prev != nil {
				prev.next = e
			}
			prev = e
		}
		p.n += len(es)
	}
	return p, nil
}

// ReadPrompts reads a prompts file (size bytes; name for errors) and
// indexes it. Row groups are read in parallel.
func ReadPrompts(ctx context.Context, r interface {
	ReadAt([]byte, int64) (int, error)
}, size int64, name string) (*Prompts, error) {
	return readPrompts(ctx, r, size, name, nil)
}

// ReadPromptsAsync is ReadPrompts in the background: it returns at once,
// and every use of the prompts waits until they are indexed. ScoreFile
// decodes the first row groups of the trajectories meanwhile and returns
// the error of reading the prompts, if any; Err waits for it too. r must
// stay open until a use of the prompts has returned.
func ReadPromptsAsync(ctx context.Context, r interface {
	ReadAt([]byte, int64) (int, error)
}, size int64, name string) *Prompts {
	return readPromptsAsync(ctx, r, size, name, nil)
}

// ReadPrompts is the package's ReadPrompts decoding only the columns
// that scoring with p reads (PromptColumns): the others are left empty
// in the index, which other programs then refuse.
func (p *Program) ReadPrompts(ctx context.Context, r interface {
	ReadAt([]byte, int64) (int, error)
}, size int64, name string) (*Prompts, error) {
	return readPrompts(ctx, r, size, name, p.PromptColumns())
}

// ReadPromptsAsync is the package's ReadPromptsAsync decoding only the
// columns that scoring with p reads, as Program.ReadPrompts.
func (p *Program) ReadPromptsAsync(ctx context.Context, r interface {
	ReadAt([]byte, int64) (int, error)
}, size int64, name string) *Prompts {
	return readPromptsAsync(ctx, r, size, name, p.PromptColumns())
}

// PromptColumns lists the prompts table's columns that scoring with p
// reads: prompt_id and those of the prompt variables its expressions
// use (row: answer, metadata, source and split). It is nil (every
// column) when the spec has verifiers or judges, which are handed whole
// prompt rows.
func (p *Program) PromptColumns() []string {
	if p.readsWholeRows() {
		return nil
	}
	cols := []string{"prompt_id"}
	for _, k := range []int{vPrompt, vMessages, vAnswer, vMetadata} {
		if p.uses.has(k) {
			cols = append(cols, variables[k].name)
		}
	}
	if p.uses.has(vRow) {
		for _, c := range []string{"answer", "metadata", "source", "split"} {
			if !slices.Contains(cols, c) {
				cols = append(cols, c)
			}
		}
	}
	return cols
}

// covers reports whether the prompts hold every column in cols (nil:
// all of them).
func (p *Prompts) covers(cols []string) bool {
	if p.cols == nil {
		return true
	}
	if cols == nil {
		return false
	}
	for _, c := range cols {
		if !slices.Contains(p.cols, c) {
			return false
		}
	}
	return true
}

func readPrompts(ctx context.Context, r interface {
	ReadAt([]byte, int64) (int, error)
}, size int64, name string, cols []string) (*Prompts, error) {
	p, err := readPromptsIndex(ctx, r, size, name, cols)
	if err != nil {
		return nil, err
	}
	p.cols = cols
	return p, nil
}

func readPromptsIndex(ctx context.Context, r interface {
	ReadAt([]byte, int64) (int, error)
}, size int64, name string, cols []string) (*Prompts, error) {
	rd, err := tables.NewReader(r, size, name, tables.Prompts, &tables.ReadOptions{Columns: cols})
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	groups := rd.File().NumRowGroups()
	if groups <= 1 || runtime.GOMAXPROCS(0) == 1 {
		entries, err := readPromptEntries(ctx, rd)
		if err != nil {
			return nil, err
		}
		return indexPrompts(entries)
	}
	parts := make([][]promptEntry, groups)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for k := range parts {
		g.Go(func() error {
			prd, err := tables.NewReader(r, size, name, tables.Prompts, &tables.ReadOptions{RowGroups: []int{k}, Columns: cols})
			if err != nil {
				return err
			}
			defer prd.Close()
			parts[k], err = readPromptEntries(gctx, prd)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// Read again in one pass for the error as it reads there (row
		// numbers counted from the file's first row).
		entries, err := readPromptEntries(ctx, rd)
		if err != nil {
			return nil, err
		}
		return indexPrompts(entries)
	}
	return indexPrompts(parts...)
}

func readPromptsAsync(ctx context.Context, r interface {
	ReadAt([]byte, int64) (int, error)
}, size int64, name string, cols []string) *Prompts {
	p := &Prompts{ready: make(chan struct{}), cols: cols}
	go func() {
		defer close(p.ready)
		idx, err := readPromptsIndex(ctx, r, size, name, cols)
		if err != nil {
			p.err = err
			return
		}
		p.m, p.n = idx.m, idx.n
	}()
	return p
}

// Err waits until the prompts are indexed and returns why reading them
// failed (nil for prompts read by ReadPrompts or NewPrompts).
func (p *Prompts) Err() error {
	if p.ready != nil {
		<-p.ready
	}
	return p.err
}

// wait is Err, or the context's error if it is done first.
func (p *Prompts) wait(ctx context.Context) error {
	if p.ready == nil {
		return nil
	}
	select {
	case <-p.ready:
		return p.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// readPromptEntries reads the rows of rd (the row groups it was opened
// with) as prompt entries.
func readPromptEntries(ctx context.Context, rd *tables.Reader[tables.Prompt]) ([]promptEntry, error) {
	md := rd.File().ParquetMetadata()
	var n int64
	for g := 0; g < md.NumRowGroups(); g++ {
		n += md.RowGroup(g).NumRows()
	}
	entries := make([]promptEntry, 0, min(n, 1<<24))
	for row, err := range rd.Rows(ctx) {
		if err != nil {
			return nil, err
		}
		entries = append(entries, promptEntry{})
		entries[len(entries)-1].set(row)
	}
	return entries, nil
}

// Len returns the number of prompts (0 when reading them failed).
func (p *Prompts) Len() int {
	p.Err()
	return len(p.m)
}

// Lookup returns the prompt with the given id. Prompts read with
// Program.ReadPrompts hold only the columns that program reads.
func (p *Prompts) Lookup(id string) (tables.Prompt, bool) {
	p.Err()
	if e, ok := p.m[id]; ok {
		return e.p, true
	}
	return tables.Prompt{}, false
}

func newPromptEntry(p tables.Prompt) *promptEntry {
	e := &promptEntry{}
	e.set(p)
	return e
}

func (e *promptEntry) set(p tables.Prompt) {
	e.p, e.prompt, e.answer = p, boxString(p.Prompt), boxString(p.Answer)
}

// emptyString is "" boxed once: the prompt text of a table read without
// that column, or of a chat prompt, costs no allocation per prompt.
var emptyString ref.Val = types.String("")

func boxString(s string) ref.Val {
	if s == "" {
		return emptyString
	}
	return types.String(s)
}

func (e *promptEntry) value(k int) ref.Val {
	switch k {
	case vPrompt:
		return e.prompt
	case vAnswer:
		return e.answer
	case vMetadata:
		e.metaOnce.Do(func() { e.meta = metadataValue(e.p.PromptID, e.p.Metadata) })
		return e.meta
	case vMessages:
		e.msgOnce.Do(func() { e.msgs = messagesValue(e.p.Messages) })
		return e.msgs
	}
	return types.NewErr("no variable %d", k)
}

// str is the prompt's text or answer (k is vPrompt or vAnswer).
func (e *promptEntry) str(k int) (string, bool) {
	switch k {
	case vPrompt:
		return e.p.Prompt, true
	case vAnswer:
		return e.p.Answer, true
	}
	return "", false
}

func metadataValue(id, text string) ref.Val {
	m := map[string]any{}
	if strings.TrimSpace(text) != "" {
		if err := json.Unmarshal([]byte(text), &m); err != nil {
			return types.NewErr("metadata of prompt %q is not a JSON object: %v", id, err)
		}
	}
	return types.NewStringInterfaceMap(types.DefaultTypeAdapter, m)
}

func messagesValue(ms []tables.Message) ref.Val {
	out := make([]ref.Val, len(ms))
	for i, m := range ms {
		out[i] = types.NewStringStringMap(types.DefaultTypeAdapter, map[string]string{"role": m.Role, "content": m.Content})
	}
	return types.NewRefValList(types.DefaultTypeAdapter, out)
}

func turnValue(role, content string, calls *string) ref.Val {
	m := map[string]any{"role": role, "content": content, "tool_calls": nil}
	if calls != nil {
		m["tool_calls"] = *calls
	}
	return types.NewStringInterfaceMap(types.DefaultTypeAdapter, m)
}

// outcomeValue is an episode's env_outcome as a map; {} when null (a
// single-turn sample).
func outcomeValue(id string, sample int32, text *string) ref.Val {
	m := map[string]any{}
	if text != nil {
		if err := json.Unmarshal([]byte(*text), &m); err != nil {
			return types.NewErr("env_outcome of sample %d of prompt %q is not a JSON object: %v", sample, id, err)
		}
	}
	return types.NewStringInterfaceMap(types.DefaultTypeAdapter, m)
}

func missingPrompt(id string) ref.Val {
	return types.NewErr("prompt %q is not in the prompts table", id)
}

// rowSource serves the variables of one Row.
type rowSource struct {
	row       *Row
	prompt    *promptEntry
	verifiers ref.Val
	judges    ref.Val
	functions ref.Val
}

func (s *rowSource) value(k, _ int) ref.Val {
	t := &s.row.Trajectory
	if v, ok := trajectoryStr(t, k); ok {
		return types.String(v)
	}
	if v, ok := trajectoryInt(t, k); ok {
		return types.Int(v)
	}
	switch k {
	case vTurns:
		out := make([]ref.Val, len(t.Turns))
		for i, tu := range t.Turns {
			out[i] = turnValue(tu.Role, tu.Content, tu.ToolCalls)
		}
		return types.NewRefValList(types.DefaultTypeAdapter, out)
	case vVerifiers:
		return s.verifiers
	case vJudges:
		return s.judges
	case vFunctions:
		return s.functions
	case vOutcome:
		return outcomeValue(t.PromptID, t.SampleIndex, t.EnvOutcome)
	case vRow:
		return rowValue(t, s.prompt)
	}
	if s.prompt == nil {
		return missingPrompt(t.PromptID)
	}
	return s.prompt.value(k)
}

func (s *rowSource) strVar(k, _ int) (string, bool) {
	if v, ok := trajectoryStr(&s.row.Trajectory, k); ok {
		return v, true
	}
	if (k == vPrompt || k == vAnswer) && s.prompt != nil {
		return s.prompt.str(k)
	}
	return "", false
}

func (s *rowSource) intVar(k, _ int) (int64, bool) {
	return trajectoryInt(&s.row.Trajectory, k)
}

// trajectoryStr is t's string variable k; false for any other variable.
func trajectoryStr(t *tables.Trajectory, k int) (string, bool) {
	switch k {
	case vCompletion:
		return t.Completion, true
	case vPromptID:
		return t.PromptID, true
	case vGroupID:
		return t.GroupID, true
	case vFinishReason:
		return t.FinishReason, true
	case vStatus:
		return t.Status, true
	case vPolicyVersion:
		return t.PolicyVersion, true
	}
	return "", false
}

// trajectoryInt is t's int variable k; false for any other variable.
func trajectoryInt(t *tables.Trajectory, k int) (int64, bool) {
	switch k {
	case vSampleIndex:
		return int64(t.SampleIndex), true
	case vNumTokens:
		return int64(t.NumTokens), true
	case vStaleness:
		return int64(t.Staleness), true
	}
	return 0, false
}

// runnerOutputs holds one row's verifier and judge results.
type runnerOutputs struct {
	verifiers []VerifierResult
	judges    []JudgeResult
}

// run calls the verifiers and judges for one row, concurrently, with the
// scoring call's memo. The fault says which one failed, or which judge
// gave a score that is NaN or infinite.
func (p *Program) run(ctx context.Context, row *Row, memo Memoizer, out *runnerOutputs) (f fault, err error) {
	out.verifiers = make([]VerifierResult, len(p.verifiers))
	out.judges = make([]JudgeResult, len(p.judges))
	n := len(p.verifiers) + len(p.judges)
	if n == 0 {
		return fault{}, nil
	}
	msgs := make([]string, n)
	var g errgroup.Group
	start(ctx, &g, p.verifiers, "verifier ", row, memo, out.verifiers, msgs)
	start(ctx, &g, p.judges, "judge ", row, memo, out.judges, msgs[len(p.verifiers):])
	if err := g.Wait(); err != nil {
		return fault{}, err
	}
	for _, m := range msgs {
		if m != "" {
			return failed(m), nil
		}
	}
	for i, j := range p.judges {
		if v := out.judges[i].Score; !tables.Finite(v) {
			return nonfinite("judge "+j.name+" score", v), nil
		}
	}
	return fault{}, nil
}

// start calls each of rs on row in g, putting its result in out and the
// message of its error, named with noun, in msgs; only a canceled context
// ends g with an error.
func start[F ~func(context.Context, Row, Memoizer) (R, error), R any](ctx context.Context, g *errgroup.Group, rs []runner[F],
	noun string, row *Row, memo Memoizer, out []R, msgs []string) {
	for i, r := range rs {
		g.Go(func() error {
			res, err := r.fn(ctx, *row, memo)
			if err != nil {
				if isCanceled(ctx, err) {
					return err
				}
				msgs[i] = named(noun+r.name, err)
			}
			out[i] = res
			return nil
		})
	}
}

// values turns runner outputs into the verifiers and judges variables.
func (p *Program) values(o *runnerOutputs) (verifiers, judges ref.Val) {
	ad := p.env.CELTypeAdapter()
	return refMap(ad, p.verifiers, o.verifiers), refMap(ad, p.judges, o.judges)
}

// refMap is the CEL map from each runner's name to its result.
func refMap[F, R any](ad types.Adapter, rs []runner[F], results []R) ref.Val {
	m := make(map[ref.Val]ref.Val, len(rs))
	for i, r := range rs {
		m[types.String(r.name)] = ad.NativeToValue(results[i])
	}
	return types.NewRefValMap(ad, m)
}

// byName maps each runner's name to its result.
func byName[F, R any](rs []runner[F], results []R) map[string]R {
	m := make(map[string]R, len(rs))
	for i, r := range rs {
		m[r.name] = results[i]
	}
	return m
}

// outputsJSON encodes runner outputs for the verifier_outputs and
// judge_outputs columns: a JSON object keyed by name, or "" when the spec
// declares none. A value JSON cannot hold (a judge's NaN score) is an
// error message for the row: the column is left empty, never silently.
func (p *Program) outputsJSON(o *runnerOutputs) (verifiers, judges, msg string) {
	if len(p.verifiers) > 0 && o.verifiers != nil {
		b, err := json.Marshal(byName(p.verifiers, o.verifiers))
		if err != nil {
			return "", "", "verifier outputs: " + err.Error()
		}
		verifiers = string(b)
	}
	if len(p.judges) > 0 && o.judges != nil {
		b, err := json.Marshal(byName(p.judges, o.judges))
		if err != nil {
			return verifiers, "", "judge outputs: " + err.Error() + " (a judge returned a value JSON cannot hold)"
		}
		judges = string(b)
	}
	return verifiers, judges, ""
}

// Score computes the reward of one row: the same policy and values as
// ScoreFile, for callers that hold rows rather than files (an online
// trainer, a test). Set row.Prompt and row.HasPrompt when the spec reads
// prompt variables (UsesPrompts). memo is handed to the verifiers and
// judges (nil: none; see ScoreOptions.Memo). The error is only for a
// canceled context; whatever goes wrong with the row itself is in the
// reward's Status and Error.
func (p *Program) Score(ctx context.Context, row Row, memo Memoizer) (tables.Reward, error) {
	t := &row.Trajectory
	r := tables.Reward{PromptID: t.PromptID, SampleIndex: t.SampleIndex, SpecDigest: p.digest, Total: math.NaN()}
	if !p.scored[t.Status] {
		r.Status = SkippedPrefix + t.Status
		r.Error = t.Error
		return r, nil
	}
	src := &rowSource{row: &row}
	if row.HasPrompt {
		src.prompt = newPromptEntry(row.Prompt)
	}
	var outs runnerOutputs
	f, err := p.run(ctx, &row, memo, &outs)
	if err != nil {
		return r, err
	}
	var encMsg string
	r.VerifierOutputs, r.JudgeOutputs, encMsg = p.outputsJSON(&outs)
	if f.msg == "" && encMsg != "" {
		f = failed(encMsg)
	}
	if f.msg != "" {
		r.Status, r.Error = f.status, &f.msg
		return r, nil
	}
	src.verifiers, src.judges = p.values(&outs)
	if len(p.functions) > 0 {
		vals, faults, err := p.callFunctions(ctx, []Row{row}, memo)
		if err != nil {
			return r, err
		}
		if f := faults[0]; f.msg != "" {
			r.Status, r.Error = f.status, &f.msg
			return r, nil
		}
		src.functions = vals[0]
	}
	var a activation
	a.at(src, 0)
	vals := make([]float64, len(p.comps))
	total, f := p.evalRow(&a, vals)
	if f.msg != "" {
		r.Status, r.Error = f.status, &f.msg
		return r, nil
	}
	r.Components = make(map[string]float64, len(p.comps))
	for j, c := range p.comps {
		r.Components[c.name] = vals[j]
	}
	r.Total, r.Status = total, StatusOK
	return r, nil
}

// ComponentNames are the spec's component names, in the spec's order.
func (p *Program) ComponentNames() []string { return p.spec.ComponentNames() }

// ScoreSample scores one sample of a problem with its prompt row: Score
// for callers that hold a trajectory and its prompt (the eval stage),
// memo as in Score.
func (p *Program) ScoreSample(ctx context.Context, traj tables.Trajectory, prompt tables.Prompt, memo Memoizer) (tables.Reward, error) {
	return p.Score(ctx, Row{Trajectory: traj, Prompt: prompt, HasPrompt: true}, memo)
}

// ExtractAnswer is the answer a completion gives as the function library
// reads it ("#### n", \boxed{…}, else the last number): ExtractAnswer.
func (p *Program) ExtractAnswer(completion string) string { return ExtractAnswer(completion) }

// named is err's message led by who failed ("judge style: …"), once: the
// judge and verifier packages often name themselves already.
func named(who string, err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, who+": ") || strings.Contains(msg, ": "+who+": ") {
		return msg
	}
	return who + ": " + msg
}
