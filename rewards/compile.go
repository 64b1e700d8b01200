package rewards

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// The variables of a reward expression. Their index is their bit in a
// varSet and their slot in an activation's cache.
const (
	vCompletion = iota
	vPromptID
	vSampleIndex
	vGroupID
	vTurns
	vNumTokens
	vFinishReason
	vStatus
	vPolicyVersion
	vStaleness
	vPrompt
	vMessages
	vAnswer
	vMetadata
	vVerifiers
	vJudges
	vOutcome
	vFunctions
	vRow
	numVars
)

type variable struct {
	name string
	typ  *cel.Type
	// column is the trajectories column the variable reads; "" for prompt
	// variables and runner outputs.
	column string
	doc    string
}

var (
	verifierType = cel.ObjectType("rewards.VerifierResult")
	judgeType    = cel.ObjectType("rewards.JudgeResult")
	turnType     = cel.MapType(cel.StringType, cel.DynType)
	messageType  = cel.MapType(cel.StringType, cel.StringType)
)

// variables lists every variable in index order.
var variables = [numVars]variable{
	vCompletion:    {"completion", cel.StringType, "completion", "final completion text"},
	vPromptID:      {"prompt_id", cel.StringType, "prompt_id", "id of the prompt"},
	vSampleIndex:   {"sample_index", cel.IntType, "sample_index", "index of the sample among its prompt's samples"},
	vGroupID:       {"group_id", cel.StringType, "group_id", "group for group-relative advantages"},
	vTurns:         {"turns", cel.ListType(turnType), "turns", "episode turns: {role, content, tool_calls (JSON text or null)}"},
	vNumTokens:     {"num_tokens", cel.IntType, "num_tokens", "number of completion tokens (cheap, unlike size(completion))"},
	vFinishReason:  {"finish_reason", cel.StringType, "finish_reason", "why generation stopped: stop, length, tool_calls, …"},
	vStatus:        {"status", cel.StringType, "status", "trajectory status (one of the spec's statuses)"},
	vPolicyVersion: {"policy_version", cel.StringType, "policy_version", "policy that sampled"},
	vStaleness:     {"staleness", cel.IntType, "staleness", "policy updates between sampling and training"},
	vPrompt:        {"prompt", cel.StringType, "", "prompt text (prompts.prompt)"},
	vMessages:      {"messages", cel.ListType(messageType), "", "chat form of the prompt: {role, content}"},
	vAnswer:        {"answer", cel.StringType, "", "reference answer (prompts.answer)"},
	vMetadata:      {"metadata", cel.MapType(cel.StringType, cel.DynType), "", "prompt metadata, parsed from its JSON text"},
	vVerifiers:     {"verifiers", cel.MapType(cel.StringType, verifierType), "", "verifier results by name"},
	vJudges:        {"judges", cel.MapType(cel.StringType, judgeType), "", "judge results by name"},
	vOutcome: {"outcome", cel.MapType(cel.StringType, cel.DynType), "env_outcome",
		"an episode's outcome in its environment, parsed from env_outcome: {reward: its step rewards' sum, info: {…}, e.g. a verifier's verdict}; {} for a single-turn sample"},
	vFunctions: {"functions", cel.MapType(cel.StringType, cel.DoubleType), "",
		"the Python functions' values by name (functions:); a row a function does not score never reaches an expression"},
	vRow: {"row", cel.MapType(cel.StringType, cel.DynType), "",
		"the row's dataset columns as a Python function receives them (Row.Columns): answer, metadata (parsed; {} when not a JSON object), prompt_id, sample_index, source, split, finish_reason, num_tokens, status"},
}

func varIndex(name string) int {
	switch name {
	case "completion":
		return vCompletion
	case "answer":
		return vAnswer
	case "num_tokens":
		return vNumTokens
	case "prompt_id":
		return vPromptID
	case "sample_index":
		return vSampleIndex
	case "group_id":
		return vGroupID
	case "turns":
		return vTurns
	case "finish_reason":
		return vFinishReason
	case "status":
		return vStatus
	case "policy_version":
		return vPolicyVersion
	case "staleness":
		return vStaleness
	case "prompt":
		return vPrompt
	case "messages":
		return vMessages
	case "metadata":
		return vMetadata
	case "verifiers":
		return vVerifiers
	case "judges":
		return vJudges
	case "outcome":
		return vOutcome
	case "functions":
		return vFunctions
	case "row":
		return vRow
	}
	return -1
}

func isVariable(name string) bool { return varIndex(name) >= 0 }

// varSet is a set of variables, one bit each.
type varSet uint32

func (s varSet) has(v int) bool { return s&(1<<v) != 0 }

const promptVars = varSet(1<<vPrompt | 1<<vMessages | 1<<vAnswer | 1<<vMetadata | 1<<vRow)

// Option configures Compile.
type Option func(*compileConfig)

type compileConfig struct {
	verifiers map[string]VerifierFunc
	judges    map[string]JudgeFunc
	functions map[string]BatchFunc
	lib       []LibOption
	env       []cel.EnvOption
	check     bool
	// interpretOnly leaves every expression to the CEL interpreter, with
	// no native plan (for tests that compare the two).
	interpretOnly bool
}

// WithVerifier gives the function that runs the spec's verifier name.
func WithVerifier(name string, v VerifierFunc) Option {
	return func(c *compileConfig) { c.verifiers[name] = v }
}

// WithJudge gives the function that runs the spec's judge name.
func WithJudge(name string, j JudgeFunc) Option {
	return func(c *compileConfig) { c.judges[name] = j }
}

// WithLibrary configures the function library (see Library).
func WithLibrary(opts ...LibOption) Option {
	return func(c *compileConfig) { c.lib = append(c.lib, opts...) }
}

// WithEnvOptions adds CEL environment options: functions of your own. The
// spec digest covers the spec's text, not their code: change a function's
// meaning and you should change the spec too.
func WithEnvOptions(opts ...cel.EnvOption) Option {
	return func(c *compileConfig) { c.env = append(c.env, opts...) }
}

// Program is a compiled spec: ready to score rows, safe for concurrent use.
// It holds no per-call state: the Memoizer of a task call is given when
// scoring (ScoreOptions.Memo), so one Program serves every call.
type Program struct {
	spec   *Spec
	digest string
	env    *cel.Env
	comps  []compiled
	total  *compiled // nil: the weighted sum
	// uses are the variables any expression reads.
	uses      varSet
	verifiers []runner[VerifierFunc]
	judges    []runner[JudgeFunc]
	functions []runner[BatchFunc]
	scored    map[string]bool
	table     *tables.Table[tables.Reward]
}

type compiled struct {
	name   string
	weight float64
	prg    cel.Program
	// native evaluates the expression without the interpreter when it can
	// (see nativeFn); nil when the expression has no native plan.
	native nativeFn
}

// runner is a verifier or a judge of a program: its name in the spec and
// the function that runs it.
type runner[F any] struct {
	name string
	fn   F
}

// bind pairs each runner the spec declares (noun "verifier" or "judge")
// with its function in impls, noting its name in seen; one without a
// function is an ErrNoRunner, the option that gives one as the hint,
// unless the compile only checks.
func bind[F ~func(context.Context, Row, Memoizer) (R, error), R any](c *compileConfig, spec *Spec, declared []Runner,
	impls map[string]F, noun, option string, seen map[string]bool, add func(error)) []runner[F] {
	var out []runner[F]
	for _, r := range declared {
		seen[r.Name] = true
		fn := impls[r.Name]
		if fn == nil && !c.check {
			add(&SpecError{File: spec.Name, Line: r.Pos.Line, Column: r.Pos.Column, kind: ErrNoRunner,
				Msg: fmt.Sprintf("%s %q has no implementation", noun, r.Name), Hint: "pass " + option})
		}
		out = append(out, runner[F]{r.Name, fn})
	}
	return out
}

// NewEnv returns the CEL environment reward expressions are checked in:
// the row variables (docs/REWARDS.md lists them), the VerifierResult and
// JudgeResult types, and the function library.
func NewEnv(opts ...Option) (*cel.Env, error) {
	c := newConfig(opts)
	return newEnv(c)
}

func newConfig(opts []Option) *compileConfig {
	c := &compileConfig{verifiers: map[string]VerifierFunc{}, judges: map[string]JudgeFunc{}, functions: map[string]BatchFunc{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

func newEnv(c *compileConfig) (*cel.Env, error) {
	envOpts := []cel.EnvOption{
		ext.NativeTypes(reflect.TypeFor[VerifierResult](), reflect.TypeFor[JudgeResult](), ext.ParseStructTags(true)),
		Library(c.lib...),
		ext.Strings(),
		ext.Math(),
	}
	for _, v := range variables {
		envOpts = append(envOpts, cel.Variable(v.name, v.typ))
	}
	envOpts = append(envOpts, c.env...)
	env, err := cel.NewEnv(envOpts...)
	if err != nil {
		return nil, fmt.Errorf("build reward environment: %w", err)
	}
	return env, nil
}

// Compile type-checks every expression of the spec and builds a program.
// Problems are reported together, each a *SpecError with the spec file,
// the component and the line and column in the file. Every verifier and
// judge the spec declares needs its function (WithVerifier, WithJudge);
// use Check to type-check a spec without them.
func Compile(spec *Spec, opts ...Option) (*Program, error) {
	return compile(spec, newConfig(opts))
}

// Check type-checks a spec as Compile does, without requiring verifier
// and judge functions. A caller that will score with the spec should
// Compile it instead, once: that is the same check.
func Check(spec *Spec, opts ...Option) error {
	c := newConfig(opts)
	c.check = true
	_, err := compile(spec, c)
	return err
}

// compilations counts the specs compiled (by Compile or Check), so that
// tests can prove a command compiles its spec once, not once per task
// call.
var compilations atomic.Int64

func compile(spec *Spec, c *compileConfig) (*Program, error) {
	compilations.Add(1)
	if spec == nil || len(spec.Components) == 0 {
		name := ""
		if spec != nil {
			name = spec.Name
		}
		return nil, &SpecError{File: name, Msg: "no components", Hint: "declare at least one entry under components"}
	}
	env, err := newEnv(c)
	if err != nil {
		return nil, err
	}
	p := &Program{spec: spec, digest: spec.Digest(), env: env, scored: map[string]bool{}}
	for _, s := range spec.Statuses {
		p.scored[s] = true
	}
	if len(spec.Statuses) == 0 {
		p.scored[tables.StatusOK] = true
	}
	var errs []error
	add := func(e error) {
		if len(errs) < maxSpecErrors {
			errs = append(errs, e)
		}
	}
	runners := map[string]map[string]bool{"verifiers": {}, "judges": {}, "functions": {}}
	p.verifiers = bind(c, spec, spec.Verifiers, c.verifiers, "verifier", "rewards.WithVerifier", runners["verifiers"], add)
	p.judges = bind(c, spec, spec.Judges, c.judges, "judge", "rewards.WithJudge", runners["judges"], add)
	for _, f := range spec.Functions {
		runners["functions"][f.Name] = true
		fn := c.functions[f.Name]
		if fn == nil && !c.check {
			add(&SpecError{File: spec.Name, Line: f.Pos.Line, Column: f.Pos.Column, kind: ErrNoRunner,
				Msg: fmt.Sprintf("function %q has no implementation", f.Name), Hint: "pass rewards.WithFunction"})
		}
		p.functions = append(p.functions, runner[BatchFunc]{f.Name, fn})
	}
	for _, comp := range spec.Components {
		prg, native, uses, cerrs := compileExpr(env, spec, comp.Name, comp.Expr, comp.ExprPos, runners)
		for _, e := range cerrs {
			add(e)
		}
		p.uses |= uses
		if c.interpretOnly {
			native = nil
		}
		p.comps = append(p.comps, compiled{name: comp.Name, weight: comp.Weight, prg: prg, native: native})
	}
	if spec.Total != "" {
		var decls []cel.EnvOption
		for _, comp := range spec.Components {
			decls = append(decls, cel.Variable(comp.Name, cel.DoubleType))
		}
		tenv, err := env.Extend(decls...)
		if err != nil {
			return nil, fmt.Errorf("build total environment: %w", err)
		}
		prg, _, uses, cerrs := compileExpr(tenv, spec, "total", spec.Total, spec.TotalPos, runners)
		for _, e := range cerrs {
			add(e)
		}
		p.uses |= uses
		p.total = &compiled{name: "total", prg: prg}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	t, err := tables.RewardsWith(spec.ComponentNames()...)
	if err != nil {
		return nil, &SpecError{File: spec.Name, Msg: err.Error()}
	}
	if spec.Correct != nil {
		// The rule travels with the rewards it judges: the health stage
		// and reports read it from the file (tables.CorrectnessOf).
		t = t.WithMetadata(tables.MetaCorrect, spec.Correct.Meta())
	}
	p.table = t
	return p, nil
}

// compileExpr checks one expression and plans it, for the interpreter and,
// when it can, natively. Errors carry positions in the spec file.
func compileExpr(env *cel.Env, spec *Spec, comp, expr string, at Pos, runners map[string]map[string]bool) (cel.Program, nativeFn, varSet, []error) {
	ast, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		var errs []error
		for _, e := range iss.Errors() {
			line, col := mapPos(at, expr, e.Location.Line(), e.Location.Column())
			errs = append(errs, &SpecError{File: spec.Name, Line: line, Column: col, Component: comp, Msg: cleanCELMessage(e.Message)})
		}
		return nil, nil, 0, errs
	}
	var errs []error
	switch t := ast.OutputType(); {
	case t.IsExactType(cel.DoubleType), t.IsExactType(cel.IntType), t.IsExactType(cel.UintType),
		t.IsExactType(cel.BoolType), t.IsExactType(cel.DynType):
	default:
		errs = append(errs, &SpecError{File: spec.Name, Line: at.Line, Column: at.Column, Component: comp,
			Msg: fmt.Sprintf("the expression gives %s, want a number (double, int or bool)", t), Hint: "e.g. cond ? 1.0 : 0.0"})
	}
	checked := ast.NativeRep()
	var uses varSet
	celast.PostOrderVisit(checked.Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		switch e.Kind() {
		case celast.IdentKind:
			if i := varIndex(e.AsIdent()); i >= 0 {
				uses |= 1 << i
			}
		case celast.SelectKind:
			// verifiers.<name> and judges.<name> must name a declared one.
			sel := e.AsSelect()
			if op := sel.Operand(); op.Kind() == celast.IdentKind {
				if known, ok := runners[op.AsIdent()]; ok && !known[sel.FieldName()] {
					errs = append(errs, runnerError(spec, comp, expr, at, checked, e.ID(), op.AsIdent(), sel.FieldName()))
				}
				if op.AsIdent() == "row" && !slices.Contains(RowColumns, sel.FieldName()) {
					errs = append(errs, rowColumnError(spec, comp, expr, at, checked, e.ID(), sel.FieldName()))
				}
			}
		case celast.CallKind:
			call := e.AsCall()
			if call.FunctionName() == operators.Index && len(call.Args()) == 2 {
				op, key := call.Args()[0], call.Args()[1]
				if op.Kind() == celast.IdentKind && key.Kind() == celast.LiteralKind {
					if s, ok := key.AsLiteral().(types.String); ok {
						if known, ok := runners[op.AsIdent()]; ok && !known[string(s)] {
							errs = append(errs, runnerError(spec, comp, expr, at, checked, e.ID(), op.AsIdent(), string(s)))
						}
						if op.AsIdent() == "row" && !slices.Contains(RowColumns, string(s)) {
							errs = append(errs, rowColumnError(spec, comp, expr, at, checked, e.ID(), string(s)))
						}
					}
				}
			}
		}
	}))
	if len(errs) > 0 {
		return nil, nil, uses, errs
	}
	prg, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, nil, uses, []error{&SpecError{File: spec.Name, Line: at.Line, Column: at.Column, Component: comp, Msg: err.Error()}}
	}
	return prg, planNative(checked), uses, nil
}

func runnerError(spec *Spec, comp, expr string, at Pos, native *celast.AST, id int64, kind, name string) error {
	loc := native.SourceInfo().GetStartLocation(id)
	line, col := mapPos(at, expr, loc.Line(), loc.Column())
	var names []string
	switch kind {
	case "verifiers":
		for _, r := range spec.Verifiers {
			names = append(names, r.Name)
		}
	case "functions":
		for _, f := range spec.Functions {
			names = append(names, f.Name)
		}
	default:
		for _, r := range spec.Judges {
			names = append(names, r.Name)
		}
	}
	hint := "declare it under " + kind
	if len(names) > 0 {
		hint = "the spec declares " + strings.Join(names, ", ")
	}
	return &SpecError{File: spec.Name, Line: line, Column: col, Component: comp,
		Msg: fmt.Sprintf("%s.%s is not declared", kind, name), Hint: hint}
}

// mapPos turns a position inside an expression (1-based line, 0-based
// column) into a position in the spec file.
func mapPos(at Pos, expr string, line, col int) (int, int) {
	if at.Line == 0 {
		return 0, 0
	}
	if line < 1 {
		line = 1
	}
	if col < 0 {
		col = 0
	}
	switch at.Style {
	case '|', '>':
		// The text starts on its own line at at.Column.
		return at.Line + line - 1, at.Column + col
	case '\'', '"':
		if line == 1 {
			return at.Line, at.Column + 1 + col
		}
	default:
		if line == 1 {
			return at.Line, at.Column + col
		}
	}
	// A quoted or plain scalar folded over lines: the line is right, the
	// column is counted from the continuation's own indentation.
	return at.Line + line - 1, col + 1
}

// cleanCELMessage drops the container note CEL adds to undeclared
// references.
func cleanCELMessage(m string) string {
	m = strings.TrimSuffix(m, " (in container '')")
	return m
}

// Spec returns the compiled spec.
func (p *Program) Spec() *Spec { return p.spec }

// Digest returns the spec digest written with every reward row.
func (p *Program) Digest() string { return p.digest }

// Table returns the rewards table this program writes: one r_<name>
// column per component.
func (p *Program) Table() *tables.Table[tables.Reward] { return p.table }

// ExpressionsOnly reports whether the spec is expressions alone: no
// verifier, judge or function, so scoring a batch is in-process
// arithmetic over its rows (the reward Task is then bookkeeping).
func (p *Program) ExpressionsOnly() bool {
	return len(p.verifiers) == 0 && len(p.judges) == 0 && len(p.functions) == 0
}

// UsesPrompts reports whether an expression reads prompt, messages,
// answer or metadata, so that scoring needs the prompts table.
func (p *Program) UsesPrompts() bool { return p.uses&promptVars != 0 }

// Variables returns the names of the variables the expressions read.
func (p *Program) Variables() []string {
	var out []string
	for i, v := range variables {
		if p.uses.has(i) {
			out = append(out, v.name)
		}
	}
	return out
}
