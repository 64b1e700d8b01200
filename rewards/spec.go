package rewards

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/internal/yamlcore"
)

// LibraryVersion is the version of the function library's semantics. It
// enters every spec digest, so that rewards computed before a change to
// what a function returns are not mistaken for current ones.
const LibraryVersion = 1

// Spec is a parsed reward spec: named components, each a CEL expression
// with a weight, and how they add up to the total.
type Spec struct {
	// Name is the file name the spec was read from, for messages.
	Name       string
	Components []Component
	// Total is a CEL expression over the component values; "" means the
	// weighted sum of the components.
	Total string
	// TotalPos is where Total is written.
	TotalPos Pos
	// Statuses lists the trajectory statuses that are scored (default
	// ["ok"]); other rows are skipped with a status.
	Statuses  []string
	Verifiers []Runner
	Judges    []Runner
	// Functions are the spec's Python reward functions (functions:),
	// read in expressions as functions.NAME.
	Functions []PyFunction
	// Correct is the spec's `correct:` key, the rule that decides which
	// samples evaluation and the health table count as correct; nil when
	// the spec has none (Correctness then gives the default).
	Correct *tables.Correctness
}

// Component is one named reward component.
type Component struct {
	Name   string
	Expr   string
	Weight float64
	// Pos is where the component starts; ExprPos where its expression is
	// written (see Pos.Quoted).
	Pos, ExprPos Pos
}

// Runner declares a verifier or judge: a name the expressions use
// (verifiers.<name>, judges.<name>) and its configuration, which the
// package that runs it reads.
type Runner struct {
	Name   string
	Config map[string]any
	Pos    Pos
	// Keys is where each key of Config is written, by its path below the
	// runner ("limits.wall", "files.check.py" is "files" then the file
	// name), so that the package that decodes Config names the line and
	// column of a bad key.
	Keys map[string]Pos
}

// PyFunction declares a Python reward function with TRL's signature
// (package rewards/python runs it): the name expressions read its value
// by (functions.NAME), where it is, the interpreter, and whether its
// results may be memoized.
type PyFunction struct {
	Name string
	// Function is "path/to/file.py:fn" (relative to the spec's directory)
	// or "package.module:fn" (installed in the interpreter).
	Function string
	// Python is a venv directory or an interpreter; "" means
	// $RLPIPE_PYTHON when set, else python3 on PATH (python.Find).
	Python string
	// Pure says the function's result depends only on its inputs, so it
	// is memoized like a verifier.
	Pure bool
	// Conversational passes completions and prompts as lists of
	// {role, content} messages, as TRL does for a conversational dataset
	// (a text completion is one assistant message, a text prompt one user
	// message), so TRL's own reward functions (trl.rewards) run unchanged.
	Conversational bool
	// Columns passes more keyword arguments, each a row column under
	// another name: keyword → column ("solution": "answer"), where a
	// column is one of FunctionColumns or "metadata.KEY", a field of the
	// row's metadata (None when it has none).
	Columns map[string]string
	// Workers is how many sandboxed workers score a batch of this
	// function, each a contiguous chunk of it (1 to MaxFunctionWorkers;
	// 0, the key absent, is 1). How the work is split, not what is
	// computed: it is not in the digest.
	Workers int
	// Limits bound each of its workers (limits:); zero fields are the
	// worker's defaults.
	Limits FunctionLimits
	// Pos is where the entry starts; Keys where each of its keys is
	// written ("name", "function", "python", "pure", "conversational",
	// "columns", "workers", "limits", "limits.wall", …).
	Pos  Pos
	Keys map[string]Pos
}

// Pos is a position in a spec file: 1-based line and column.
type Pos struct {
	Line, Column int
	// Style is how the expression is written, which decides how a
	// position inside it maps to the file: 0 plain, '\'' or '"' quoted,
	// '|' or '>' a block scalar whose text starts on the next line at
	// Column.
	Style byte
}

// SpecError is one problem in a reward spec, with where it is.
type SpecError struct {
	File         string
	Line, Column int    // 0 when the problem has no single place
	Component    string // "" when the problem is not in a component; "total" for the total
	Msg          string
	Hint         string

	kind error // a more specific cause (ErrNoRunner), or nil
}

func (e *SpecError) Error() string {
	var b strings.Builder
	b.WriteString(yamlcore.Where(e.File, e.Line, e.Column) + ": ")
	switch e.Component {
	case "":
	case "total":
		b.WriteString("total: ")
	default:
		fmt.Fprintf(&b, "component %q: ", e.Component)
	}
	b.WriteString(e.Msg)
	if e.Hint != "" {
		b.WriteString(" (" + e.Hint + ")")
	}
	return b.String()
}

// Unwrap makes every spec error an ErrSpec.
func (e *SpecError) Unwrap() error {
	if e.kind != nil {
		return e.kind
	}
	return ErrSpec
}

// maxSpecErrors bounds how many problems one parse or compile reports.
const maxSpecErrors = 20

// LoadSpec reads and parses a spec file.
func LoadSpec(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read reward spec: %w", err)
	}
	return ParseSpec(path, data)
}

// ParseSpec parses a spec; name identifies it in errors. Every problem
// found is reported (up to 20), each a *SpecError with its line and
// column, joined with errors.Join; all match ErrSpec.
func ParseSpec(name string, data []byte) (s *Spec, err error) {
	defer func() {
		// The YAML library is not ours to trust with every input.
		if p := recover(); p != nil {
			s, err = nil, &SpecError{File: name, Msg: fmt.Sprintf("not valid YAML (%v)", p)}
		}
	}()
	// Numbers are read by the YAML 1.2 core schema: weight: 1e-3 is a
	// float, as in a pipeline file.
	f, err := yamlcore.Parse(data)
	if err != nil {
		return nil, yamlError(name, err)
	}
	d := &specDecoder{spec: &Spec{Name: name}, lines: strings.Split(string(data), "\n")}
	var root ast.Node
	if len(f.Docs) > 1 {
		d.add(&SpecError{File: name, Msg: "a spec is one YAML document; found " + fmt.Sprint(len(f.Docs))})
	}
	if len(f.Docs) > 0 {
		root = f.Docs[0].Body
	}
	d.top(root)
	if len(d.errs) > 0 {
		return nil, errors.Join(d.errs...)
	}
	return d.spec, nil
}

func yamlError(name string, err error) error {
	se, ok := yamlcore.Syntax(err)
	if !ok {
		return &SpecError{File: name, Msg: "not valid YAML: " + firstLine(err.Error())}
	}
	return &SpecError{File: name, Line: se.Line, Column: se.Column, Msg: "not valid YAML: " + se.Msg, Hint: se.Hint}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

type specDecoder struct {
	spec  *Spec
	lines []string
	errs  []error
}

func (d *specDecoder) add(e *SpecError) {
	if len(d.errs) < maxSpecErrors {
		d.errs = append(d.errs, e)
	}
}

func (d *specDecoder) errorf(n ast.Node, comp, hint, format string, a ...any) {
	p := posOf(n)
	d.add(&SpecError{File: d.spec.Name, Line: p.Line, Column: p.Column, Component: comp, Msg: fmt.Sprintf(format, a...), Hint: hint})
}

func posOf(n ast.Node) Pos {
	line, col := yamlcore.Position(n)
	return Pos{Line: line, Column: col}
}

// unwrap looks through anchors and tags.
func unwrap(n ast.Node) ast.Node {
	for {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		default:
			return n
		}
	}
}

func isNull(n ast.Node) bool {
	_, ok := n.(*ast.NullNode)
	return n == nil || ok
}

// mapping returns the key/value pairs of a mapping node, reporting
// anything else.
func (d *specDecoder) mapping(n ast.Node, comp, what string) ([]*ast.MappingValueNode, bool) {
	switch v := unwrap(n).(type) {
	case *ast.MappingNode:
		return v.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{v}, true
	}
	d.errorf(n, comp, "", "%s: expected a mapping, found %s", what, describe(n))
	return nil, false
}

func (d *specDecoder) sequence(n ast.Node, what string) ([]ast.Node, bool) {
	if v, ok := unwrap(n).(*ast.SequenceNode); ok {
		return v.Values, true
	}
	d.errorf(n, "", "", "%s: expected a list, found %s", what, describe(n))
	return nil, false
}

func describe(n ast.Node) string {
	n = unwrap(n)
	switch n.(type) {
	case nil, *ast.NullNode:
		return "nothing"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", clip(strings.TrimSpace(n.String()), 40))
}

// fields sets dst[i] to the value of the key known[i] in kvs (a key
// given twice: its last value) and reports each other key as unknown,
// under label; with stop it reports only the first. It returns whether
// every key was known.
func (d *specDecoder) fields(kvs []*ast.MappingValueNode, label string, known []string, stop bool, dst ...*ast.Node) bool {
	ok := true
	for _, kv := range kvs {
		k := keyOf(kv)
		i := slices.Index(known, k)
		if i >= 0 {
			*dst[i] = kv.Value
			continue
		}
		d.errorf(kv.Key, "", yamlcore.Suggest(k, known), "%s: unknown key %q", label, k)
		if stop {
			return false
		}
		ok = false
	}
	return ok
}

func keyOf(kv *ast.MappingValueNode) string {
	if kv.Key == nil {
		return ""
	}
	if s, ok := unwrap(kv.Key).(*ast.StringNode); ok {
		return s.Value
	}
	return strings.TrimSpace(kv.Key.String())
}

// str reads a string scalar and how it is written.
func (d *specDecoder) str(n ast.Node, comp, what string) (string, Pos, bool) {
	n = unwrap(n)
	p := posOf(n)
	switch v := n.(type) {
	case *ast.StringNode:
		if v.Token != nil {
			switch v.Token.Type {
			case token.SingleQuoteType:
				p.Style = '\''
			case token.DoubleQuoteType:
				p.Style = '"'
			}
		}
		return v.Value, p, true
	case *ast.LiteralNode:
		p.Style = '|'
		if v.Start != nil && strings.HasPrefix(v.Start.Value, ">") {
			p.Style = '>'
		}
		// The text starts on the first non-blank line after the indicator,
		// at that line's indentation.
		for l := p.Line + 1; l <= len(d.lines); l++ {
			t := strings.TrimRight(d.lines[l-1], " \r")
			if t == "" {
				continue
			}
			p.Line, p.Column = l, len(t)-len(strings.TrimLeft(t, " "))+1
			break
		}
		if v.Value != nil {
			return v.Value.Value, p, true
		}
		return "", p, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode:
		// An expression may be a bare literal: `expr: 1.0`.
		return strings.TrimSpace(v.String()), p, true
	}
	d.errorf(n, comp, "", "%s: expected a string, found %s", what, describe(n))
	return "", p, false
}

// boolean reads a true or false scalar, the flags of a function (pure:,
// conversational:); what names the key in the error.
func (d *specDecoder) boolean(n ast.Node, what string) (bool, bool) {
	b, ok := unwrap(n).(*ast.BoolNode)
	if !ok {
		d.errorf(n, "", "", "%s: expected true or false, found %s", what, describe(n))
		return false, false
	}
	return b.Value, true
}

var knownTop = []string{"components", "total", "statuses", "verifiers", "judges", "functions", "correct"}

func (d *specDecoder) top(root ast.Node) {
	if isNull(unwrap(root)) {
		d.add(&SpecError{File: d.spec.Name, Msg: "the spec is empty", Hint: "declare at least one entry under components"})
		return
	}
	kvs, ok := d.mapping(root, "", "the spec")
	if !ok {
		return
	}
	seen := map[string]bool{}
	var comps, correct ast.Node
	for _, kv := range kvs {
		k := keyOf(kv)
		if seen[k] {
			d.errorf(kv.Key, "", "", "key %q appears twice", k)
			continue
		}
		seen[k] = true
		switch k {
		case "components":
			comps = kv.Value
			d.components(kv.Value, kv.Key)
		case "total":
			if isNull(unwrap(kv.Value)) {
				continue
			}
			s, p, ok := d.str(kv.Value, "total", "total")
			if ok {
				d.spec.Total, d.spec.TotalPos = strings.TrimSpace(s), p
				if d.spec.Total == "" {
					d.errorf(kv.Value, "total", "leave total out for the weighted sum", "the expression is empty")
				}
			}
		case "statuses":
			d.statuses(kv.Value)
		case "verifiers":
			d.spec.Verifiers = d.runners(kv.Value, "verifiers")
		case "judges":
			d.spec.Judges = d.runners(kv.Value, "judges")
		case "functions":
			d.spec.Functions = d.functions(kv.Value)
		case "correct":
			correct = kv.Value
		default:
			d.errorf(kv.Key, "", yamlcore.Suggest(k, knownTop), "unknown key %q", k)
		}
	}
	if comps == nil {
		d.add(&SpecError{File: d.spec.Name, Msg: "no components", Hint: "declare at least one entry under components"})
	}
	if correct != nil {
		d.correct(correct)
	}
	if len(d.errs) > 0 {
		return
	}
	if d.spec.Total != "" {
		for _, c := range d.spec.Components {
			if c.Weight != 1 {
				d.add(&SpecError{File: d.spec.Name, Line: c.Pos.Line, Column: c.Pos.Column, Component: c.Name,
					Msg: "weight has no effect when total is an expression", Hint: "write the weight into total, or remove total for the weighted sum"})
			}
		}
	}
	if d.spec.Statuses == nil {
		d.spec.Statuses = []string{tables.StatusOK}
	}
}

var knownComponent = []string{"name", "expr", "weight"}

func (d *specDecoder) components(n, key ast.Node) {
	items, ok := d.sequence(n, "components")
	if !ok {
		return
	}
	if len(items) == 0 {
		d.errorf(key, "", "declare at least one entry under components", "components is empty")
		return
	}
	names := map[string]Pos{}
	for i, it := range items {
		label := fmt.Sprintf("components[%d]", i)
		kvs, ok := d.mapping(it, "", label)
		if !ok {
			continue
		}
		c := Component{Weight: 1, Pos: posOf(it)}
		var nameNode, exprNode, weightNode ast.Node
		d.fields(kvs, label, knownComponent, false, &nameNode, &exprNode, &weightNode)
		if len(kvs) > 0 {
			c.Pos = posOf(kvs[0].Key)
		}
		if nameNode == nil {
			d.errorf(it, "", "", "%s: name is missing", label)
			continue
		}
		name, np, ok := d.str(nameNode, "", label+".name")
		if !ok {
			continue
		}
		c.Name = name
		if err := validName(name); err != "" {
			d.add(&SpecError{File: d.spec.Name, Line: np.Line, Column: np.Column, Msg: fmt.Sprintf("%s: %s", label, err),
				Hint: "use lower-case letters, digits and _, starting with a letter"})
			continue
		}
		if first, dup := names[name]; dup {
			d.add(&SpecError{File: d.spec.Name, Line: np.Line, Column: np.Column, Component: name,
				Msg: fmt.Sprintf("declared twice (first at line %d)", first.Line), Hint: "component names are column names: make them unique"})
			continue
		}
		names[name] = np
		if exprNode == nil || isNull(unwrap(exprNode)) {
			d.errorf(it, name, "", "expr is missing")
		} else if e, p, ok := d.str(exprNode, name, "expr"); ok {
			c.Expr, c.ExprPos = e, p
			if strings.TrimSpace(e) == "" {
				d.errorf(exprNode, name, "", "expr is empty")
			}
		}
		if weightNode != nil {
			switch v := unwrap(weightNode).(type) {
			case *ast.IntegerNode:
				switch x := v.Value.(type) {
				case int64:
					c.Weight = float64(x)
				case uint64:
					c.Weight = float64(x)
				}
			case *ast.FloatNode:
				c.Weight = v.Value
			default:
				d.errorf(weightNode, name, "write a number such as 1 or 0.2", "weight must be a number, found %s", describe(weightNode))
			}
			if math.IsNaN(c.Weight) || math.IsInf(c.Weight, 0) {
				d.errorf(weightNode, name, "", "weight must be a finite number")
			}
		}
		d.spec.Components = append(d.spec.Components, c)
	}
}

func (d *specDecoder) statuses(n ast.Node) {
	items, ok := d.sequence(n, "statuses")
	if !ok {
		return
	}
	d.spec.Statuses = []string{}
	for _, it := range items {
		s, _, ok := d.str(it, "", "statuses")
		if !ok {
			continue
		}
		if !slices.Contains(tables.Statuses, s) {
			d.errorf(it, "", "one of "+strings.Join(tables.Statuses, ", "), "statuses: unknown trajectory status %q", s)
			continue
		}
		if !slices.Contains(d.spec.Statuses, s) {
			d.spec.Statuses = append(d.spec.Statuses, s)
		}
	}
	if len(d.spec.Statuses) == 0 && len(items) == 0 {
		d.errorf(n, "", "leave statuses out to score status ok only", "statuses is empty: nothing would be scored")
	}
}

func (d *specDecoder) runners(n ast.Node, what string) []Runner {
	items, ok := d.sequence(n, what)
	if !ok {
		return nil
	}
	var out []Runner
	seen := map[string]bool{}
	for i, it := range items {
		label := fmt.Sprintf("%s[%d]", what, i)
		kvs, ok := d.mapping(it, "", label)
		if !ok {
			continue
		}
		r := Runner{Config: map[string]any{}, Pos: posOf(it), Keys: map[string]Pos{}}
		if len(kvs) > 0 {
			r.Pos = posOf(kvs[0].Key)
		}
		for _, kv := range kvs {
			k := keyOf(kv)
			if k == "name" {
				if name, ok := d.name(kv.Value, label); ok {
					r.Name = name
				}
				continue
			}
			keyPositions(kv, k, r.Keys)
			// The runner's package decodes its config into typed keys
			// (runners.decode), which read 1e-3 as a float where one is
			// wanted; until then a number keeps the text it was written
			// as, so that a key taking a string (stdin: 1e3) is not
			// rewritten as the float's "1000".
			kv.Value = yamlcore.Restore(kv.Value, func(*ast.FloatNode) bool { return true })
			var v any
			if err := yaml.NodeToValue(kv.Value, &v); err != nil {
				d.errorf(kv.Value, "", "", "%s.%s: %s", label, k, firstLine(err.Error()))
				continue
			}
			v, msg := plainValue(v)
			if msg != "" {
				d.errorf(kv.Value, "", "", "%s.%s: %s", label, k, msg)
				continue
			}
			r.Config[k] = v
		}
		if r.Name == "" {
			d.errorf(it, "", "", "%s: name is missing", label)
			continue
		}
		if seen[r.Name] {
			d.errorf(it, "", "", "%s: %q declared twice", label, r.Name)
			continue
		}
		seen[r.Name] = true
		out = append(out, r)
	}
	return out
}

var knownFunction = []string{"name", "function", "python", "pure", "conversational", "columns", "workers", "limits"}

// FunctionColumns are the row columns a Python function receives by
// name, besides completions and prompts (docs/REWARDS.md): Row.Columns'.
var FunctionColumns = RowColumns

// FunctionLimits bound a Python function's workers: wall per batch (per
// chunk with workers:), CPU time and memory over a worker's life. Zero is
// rewards/python's default (1 minute, 1 hour, 2 GiB).
type FunctionLimits struct {
	Wall, CPUTime time.Duration
	MemoryMB      int64
}

// knownFunctionLimits are the keys of a function's limits:.
var knownFunctionLimits = []string{"wall", "cpu_time", "memory_mb"}

// maxFunctionMemoryMB bounds limits.memory_mb: 1 TiB.
const maxFunctionMemoryMB = 1 << 20

// MaxFunctionWorkers bounds a function's workers: key.
const MaxFunctionWorkers = 16

// functions reads the functions: list.
func (d *specDecoder) functions(n ast.Node) []PyFunction {
	items, ok := d.sequence(n, "functions")
	if !ok {
		return nil
	}
	var out []PyFunction
	seen := map[string]bool{}
	for i, it := range items {
		label := fmt.Sprintf("functions[%d]", i)
		kvs, ok := d.mapping(it, "", label)
		if !ok {
			continue
		}
		f := PyFunction{Pos: posOf(it), Keys: map[string]Pos{}}
		if len(kvs) > 0 {
			f.Pos = posOf(kvs[0].Key)
		}
		var nameNode, fnNode, pyNode, pureNode, convNode, colsNode, workersNode, limitsNode ast.Node
		if !d.fields(kvs, label, knownFunction, false, &nameNode, &fnNode, &pyNode, &pureNode, &convNode, &colsNode, &workersNode, &limitsNode) {
			continue
		}
		for _, kv := range kvs {
			f.Keys[keyOf(kv)] = posOf(kv.Key)
		}
		at := func(hint, format string, a ...any) {
			d.add(&SpecError{File: d.spec.Name, Line: f.Pos.Line, Column: f.Pos.Column, Msg: fmt.Sprintf(format, a...), Hint: hint})
		}
		if nameNode == nil {
			at("", "%s: name is missing", label)
			continue
		}
		if f.Name, ok = d.name(nameNode, label); !ok {
			continue
		}
		if fnNode == nil {
			at("e.g. function: rewards.py:accuracy", "%s: function is missing", label)
			continue
		}
		if f.Function, _, ok = d.str(fnNode, "", label+".function"); !ok {
			continue
		}
		if msg := checkFunctionRef(f.Function); msg != "" {
			d.errorf(fnNode, "", "path/to/file.py:function or package.module:function", "%s.function: %s", label, msg)
			continue
		}
		if pyNode != nil && !isNull(unwrap(pyNode)) {
			if f.Python, _, ok = d.str(pyNode, "", label+".python"); !ok {
				continue
			}
		}
		if pureNode != nil {
			if f.Pure, ok = d.boolean(pureNode, label+".pure"); !ok {
				continue
			}
		}
		if convNode != nil {
			if f.Conversational, ok = d.boolean(convNode, label+".conversational"); !ok {
				continue
			}
		}
		if colsNode != nil {
			if f.Columns, ok = d.functionColumns(colsNode, label+".columns"); !ok {
				continue
			}
		}
		if workersNode != nil {
			n, ok := number(workersNode)
			if !ok || n != math.Trunc(n) || n < 1 || n > MaxFunctionWorkers {
				d.errorf(workersNode, "", "e.g. workers: 2, about the cores scoring may use", "%s.workers: expected a whole number from 1 to %d, found %s", label, MaxFunctionWorkers, describe(workersNode))
				continue
			}
			f.Workers = int(n)
		}
		if limitsNode != nil && !d.functionLimits(limitsNode, label+".limits", &f) {
			continue
		}
		if seen[f.Name] {
			at("", "%s: %q declared twice", label, f.Name)
			continue
		}
		seen[f.Name] = true
		out = append(out, f)
	}
	return out
}

// functionColumns reads a function's columns: mapping, keyword →
// column.
func (d *specDecoder) functionColumns(n ast.Node, label string) (map[string]string, bool) {
	kvs, ok := d.mapping(n, "", label)
	if !ok {
		return nil, false
	}
	out := map[string]string{}
	for _, kv := range kvs {
		kw := keyOf(kv)
		switch {
		case !isIdent(kw):
			d.errorf(kv.Key, "", "", "%s: %q is not a Python name", label, kw)
			return nil, false
		case kw == "completions" || kw == "prompts" || slices.Contains(FunctionColumns, kw):
			d.errorf(kv.Key, "", "", "%s: %q is already an argument of every function", label, kw)
			return nil, false
		}
		col, _, ok := d.str(kv.Value, "", label+"."+kw)
		if !ok {
			return nil, false
		}
		field, isMeta := strings.CutPrefix(col, "metadata.")
		if !slices.Contains(FunctionColumns, col) && (!isMeta || field == "") {
			d.errorf(kv.Value, "", "one of "+strings.Join(FunctionColumns, ", ")+", or metadata.KEY",
				"%s.%s: no column %q", label, kw, col)
			return nil, false
		}
		out[kw] = col
	}
	return out, true
}

// functionLimits reads a function's limits: into f, reporting whether it
// could.
func (d *specDecoder) functionLimits(n ast.Node, label string, f *PyFunction) bool {
	kvs, ok := d.mapping(n, "", label)
	if !ok {
		return false
	}
	var wall, cpu, mem ast.Node
	if !d.fields(kvs, label, knownFunctionLimits, false, &wall, &cpu, &mem) {
		return false
	}
	for _, kv := range kvs {
		f.Keys["limits."+keyOf(kv)] = posOf(kv.Key)
	}
	ok = true
	for _, t := range []struct {
		key  string
		node ast.Node
		dst  *time.Duration
	}{{"wall", wall, &f.Limits.Wall}, {"cpu_time", cpu, &f.Limits.CPUTime}} {
		if t.node == nil {
			continue
		}
		s, isStr := unwrap(t.node).(*ast.StringNode)
		var v time.Duration
		var err error
		if isStr {
			v, err = time.ParseDuration(s.Value)
		}
		if !isStr || err != nil || v <= 0 {
			d.errorf(t.node, "", "a duration such as 30s or 2m", "%s.%s: expected a positive duration, found %s", label, t.key, describe(t.node))
			ok = false
			continue
		}
		*t.dst = v
	}
	if mem != nil {
		v, isNum := number(mem)
		if !isNum || v != math.Trunc(v) || v < 1 || v > maxFunctionMemoryMB {
			d.errorf(mem, "", "e.g. memory_mb: 2048", "%s.memory_mb: expected a whole number of MiB from 1 to %d, found %s", label, maxFunctionMemoryMB, describe(mem))
			return false
		}
		f.Limits.MemoryMB = int64(v)
	}
	return ok
}

// checkFunctionRef says what is wrong with a functions[].function value,
// or "".
func checkFunctionRef(ref string) string {
	target, fn, ok := strings.Cut(ref, ":")
	switch {
	case !ok || target == "" || fn == "" || strings.Contains(fn, ":"):
		return fmt.Sprintf("%q names no function", ref)
	case !isIdent(fn):
		return fmt.Sprintf("%q: %q is not a Python name", ref, fn)
	case strings.HasSuffix(target, ".py"):
		return ""
	case strings.ContainsAny(target, "/\\"):
		return fmt.Sprintf("%q: a file must end in .py", ref)
	}
	for _, part := range strings.Split(target, ".") {
		if !isIdent(part) {
			return fmt.Sprintf("%q: %q is not a module name", ref, target)
		}
	}
	return ""
}

// isIdent reports whether s is an ASCII Python identifier.
func isIdent(s string) bool {
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// name reads the name of a runner or a function, under label, and checks
// that expressions can use it.
func (d *specDecoder) name(n ast.Node, label string) (string, bool) {
	name, np, ok := d.str(n, "", label+".name")
	if !ok {
		return "", false
	}
	if err := validName(name); err != "" {
		d.add(&SpecError{File: d.spec.Name, Line: np.Line, Column: np.Column, Msg: label + ": " + err,
			Hint: "use lower-case letters, digits and _, starting with a letter"})
		return "", false
	}
	return name, true
}

// keyPositions records where the key of kv, at path, and every key
// below it are written.
func keyPositions(kv *ast.MappingValueNode, path string, out map[string]Pos) {
	out[path] = posOf(kv.Key)
	switch v := unwrap(kv.Value).(type) {
	case *ast.MappingNode:
		for _, c := range v.Values {
			keyPositions(c, path+"."+keyOf(c), out)
		}
	case *ast.MappingValueNode:
		keyPositions(v, path+"."+keyOf(v), out)
	case *ast.SequenceNode:
		for i, e := range v.Values {
			p := fmt.Sprintf("%s[%d]", path, i)
			out[p] = posOf(e)
			if m, ok := unwrap(e).(*ast.MappingNode); ok {
				for _, c := range m.Values {
					keyPositions(c, p+"."+keyOf(c), out)
				}
			}
		}
	}
}

// plainValue makes a configuration value JSON-encodable, the form the
// digest hashes: maps get string keys; infinities and NaN are refused.
func plainValue(v any) (any, string) {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, "numbers must be finite"
		}
	case map[string]any:
		for k, e := range x {
			e, msg := plainValue(e)
			if msg != "" {
				return nil, msg
			}
			x[k] = e
		}
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			e, msg := plainValue(e)
			if msg != "" {
				return nil, msg
			}
			m[fmt.Sprint(k)] = e
		}
		return m, ""
	case []any:
		for i, e := range x {
			e, msg := plainValue(e)
			if msg != "" {
				return nil, msg
			}
			x[i] = e
		}
	}
	return v, ""
}

// validName checks a component, verifier or judge name; it returns what
// is wrong, or "".
func validName(n string) string {
	if !tables.IsComponentName(n) {
		return fmt.Sprintf("name %q is not a valid name", n)
	}
	if isVariable(n) || celReserved[n] {
		return fmt.Sprintf("name %q is taken by a CEL variable or keyword", n)
	}
	return ""
}

var celReserved = map[string]bool{
	"in": true, "as": true, "break": true, "const": true, "continue": true, "else": true, "false": true,
	"for": true, "function": true, "if": true, "import": true, "let": true, "loop": true, "package": true,
	"namespace": true, "null": true, "return": true, "true": true, "var": true, "void": true, "while": true,
	"total": true,
}

// canonical is what a digest hashes: the parsed spec, not its text.
type canonical struct {
	Format     string          `json:"format"`
	Library    int             `json:"library"`
	Components []canonicalComp `json:"components"`
	Total      string          `json:"total"`
	Statuses   []string        `json:"statuses"`
	Verifiers  []canonicalRun  `json:"verifiers"`
	Judges     []canonicalRun  `json:"judges"`
	// Correct is the declared correctness rule, absent without one.
	Correct *canonicalCorrect `json:"correct,omitempty"`
	// Functions are the Python functions, absent without any.
	Functions []canonicalFn `json:"functions,omitempty"`
}

// canonicalFn is a Python function as a digest sees it: its declaration,
// not its code (see Digest).
type canonicalFn struct {
	Name           string            `json:"name"`
	Function       string            `json:"function"`
	Python         string            `json:"python"`
	Pure           bool              `json:"pure"`
	Conversational bool              `json:"conversational,omitempty"`
	Columns        map[string]string `json:"columns,omitempty"`
	// Limits are absent without a limits: key, so that such a function's
	// digest is what it was before the key existed.
	Limits *canonicalFnLimits `json:"limits,omitempty"`
}

type canonicalFnLimits struct {
	Wall     string `json:"wall,omitempty"`
	CPUTime  string `json:"cpu_time,omitempty"`
	MemoryMB int64  `json:"memory_mb,omitempty"`
}

type canonicalComp struct {
	Name   string  `json:"name"`
	Expr   string  `json:"expr"`
	Weight float64 `json:"weight"`
}

type canonicalRun struct {
	Name   string         `json:"name"`
	Config map[string]any `json:"config"`
}

// Digest returns "sha256:" and the hex SHA-256 of the spec's canonical
// encoding: JSON of the components (name, expression with surrounding
// space trimmed, weight) in order, the total, the scored statuses (sorted),
// the verifiers and judges with their configuration (keys sorted), the
// declared correctness rule (left out without a `correct:` key, so that
// such a spec's digest is what it was before the key existed), the Python
// functions' declarations (left out without a `functions:` key, for the
// same reason; a function's code is not hashed: change what it computes
// and change the spec too, as for WithEnvOptions), the
// format name and LibraryVersion. Comments, layout, quoting and key order
// in the YAML do not change it; any change to what is computed does.
func (s *Spec) Digest() string {
	c := canonical{Format: "rlpipe.rewards/v1", Library: LibraryVersion, Total: strings.TrimSpace(s.Total),
		Components: []canonicalComp{}, Verifiers: []canonicalRun{}, Judges: []canonicalRun{}, Correct: canonicalCorrectOf(s.Correct)}
	for _, x := range s.Components {
		c.Components = append(c.Components, canonicalComp{x.Name, strings.TrimSpace(x.Expr), x.Weight})
	}
	c.Statuses = slices.Sorted(slices.Values(s.Statuses))
	if len(c.Statuses) == 0 {
		c.Statuses = []string{tables.StatusOK}
	}
	for _, r := range s.Verifiers {
		c.Verifiers = append(c.Verifiers, canonicalRun{r.Name, r.Config})
	}
	for _, r := range s.Judges {
		c.Judges = append(c.Judges, canonicalRun{r.Name, r.Config})
	}
	for _, f := range s.Functions {
		cf := canonicalFn{Name: f.Name, Function: f.Function, Python: f.Python, Pure: f.Pure, Conversational: f.Conversational, Columns: f.Columns}
		if l := f.Limits; l != (FunctionLimits{}) {
			cf.Limits = &canonicalFnLimits{MemoryMB: l.MemoryMB}
			if l.Wall > 0 {
				cf.Limits.Wall = l.Wall.String()
			}
			if l.CPUTime > 0 {
				cf.Limits.CPUTime = l.CPUTime.String()
			}
		}
		c.Functions = append(c.Functions, cf)
	}
	b, err := json.Marshal(c)
	if err != nil {
		// Configuration values come from YAML: maps with string keys,
		// lists and scalars, all of which encode. A failure is a bug.
		panic(fmt.Sprintf("rewards: encode spec for its digest: %v", err))
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ComponentNames returns the component names in order.
func (s *Spec) ComponentNames() []string {
	out := make([]string, len(s.Components))
	for i, c := range s.Components {
		out[i] = c.Name
	}
	return out
}
