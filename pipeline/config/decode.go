package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/rlpipe/rlpipe/internal/yamlcore"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
)

// Error is one problem in a pipeline config, with where it is.
type Error struct {
	File         string
	Line, Column int    // 0 when the problem has no single place
	Path         string // the key's path, e.g. environments.gen.retries
	Msg          string
	Hint         string // e.g. `did you mean "retries"?`
	// Override is the command-line override the problem is in
	// (stages.train.lr=abc), named instead of File and a place; "" for
	// one in the file.
	Override string

	kind error // a more specific cause (ErrReserved), or nil
}

func (e *Error) Error() string {
	msg := yamlcore.Where(e.File, e.Line, e.Column) + ": " + e.Msg
	if e.Override != "" {
		msg = "override " + e.Override + ": " + e.Msg
	}
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// Unwrap makes every config error a pipeline.ErrConfig.
func (e *Error) Unwrap() []error {
	if e.kind != nil {
		return []error{e.kind}
	}
	return []error{pipeline.ErrConfig}
}

// ErrReserved marks a section that later versions fill in (reward): it is rejected rather than silently ignored.
var ErrReserved = fmt.Errorf("%w: section not available yet", pipeline.ErrConfig)

// reserved are top-level sections that later versions define.
var reserved = map[string]string{
	"reward": "reward specifications",
}

type position struct{ line, col int }

// maxErrors bounds how many problems one parse reports.
const maxErrors = 20

// decoder walks the YAML tree against the Config type before decoding,
// so that every unknown key and wrong type is reported with its path and
// position, and records where each key is for later checks.
type decoder struct {
	file string
	pos  map[string]position
	errs []error
	reg  *kind.Registry
	text map[*ast.FloatNode]bool // numbers yamlcore resolved where a string is wanted
}

func (d *decoder) add(err error) {
	if len(d.errs) < maxErrors {
		d.errs = append(d.errs, err)
	}
}

func (d *decoder) errorf(p position, path, hint, format string, a ...any) *Error {
	return &Error{File: d.file, Line: p.line, Column: p.col, Path: path, Msg: fmt.Sprintf(format, a...), Hint: hint}
}

func (d *decoder) err() error { return errors.Join(d.errs...) }

var (
	configType   = reflect.TypeFor[Config]()
	stageType    = reflect.TypeFor[Stage]()
	policyType   = reflect.TypeFor[Policy]()
	trackerType  = reflect.TypeFor[Tracker]()
	durationType = reflect.TypeFor[time.Duration]()
)

func posOf(n ast.Node) position {
	line, col := yamlcore.Position(n)
	return position{line, col}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// where names a path for messages.
func where(path string) string {
	if path == "" {
		return "at the top level"
	}
	return "in " + path
}

// unwrap is the node an anchor or a tag marks.
func unwrap(n ast.Node) ast.Node {
	for {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
			continue
		case *ast.TagNode:
			n = v.Value
			continue
		}
		break
	}
	return n
}

// walk checks node n against type t.
func (d *decoder) walk(n ast.Node, t reflect.Type, path string) {
	n = unwrap(n)
	switch n.(type) {
	case nil, *ast.NullNode, *ast.AliasNode:
		// Null is the zero value; an alias repeats a node checked where it
		// was anchored.
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	p := posOf(n)
	switch {
	case t.Kind() == reflect.Interface:
		// Free-form values (an external trainer's hyperparameters): any
		// YAML is accepted and passed on as is.
		return
	case t == durationType:
		s, ok := n.(*ast.StringNode)
		if !ok {
			d.add(d.errorf(p, path, `write a Go duration such as "200ms", "2s" or "5m"`, "%s: %s is not a duration", path, scalarText(n)))
			return
		}
		if _, err := time.ParseDuration(s.Value); err != nil {
			d.add(d.errorf(p, path, `write a Go duration such as "200ms", "2s" or "5m"`, "%s: %q is not a duration", path, s.Value))
		}
	case t.Kind() == reflect.Struct && keywordsOf(t) != nil:
		kws := keywordsOf(t)
		if sn, ok := n.(*ast.StringNode); ok && slices.Contains(kws, sn.Value) {
			return
		}
		if _, ok := n.(*ast.MappingNode); !ok {
			if _, ok := n.(*ast.MappingValueNode); !ok {
				d.add(d.errorf(p, path, fmt.Sprintf("write %s, or a mapping of its keys", strings.Join(kws, " or ")),
					"%s: expected a mapping or %s, got %s", path, strings.Join(kws, " or "), describe(n)))
				return
			}
		}
		d.walkStruct(n, t, path)
	case t.Kind() == reflect.Struct:
		d.walkStruct(n, t, path)
	case t.Kind() == reflect.Map:
		d.eachEntry(n, path, func(key string, kp position, v ast.Node) {
			d.pos[join(path, key)] = kp
			d.walk(v, t.Elem(), join(path, key))
		})
	case t.Kind() == reflect.Slice:
		seq, ok := n.(*ast.SequenceNode)
		if !ok {
			d.add(d.errorf(p, path, "write a list, e.g. [a, b]", "%s: expected a list, got %s", path, describe(n)))
			return
		}
		for i, v := range seq.Values {
			ip := fmt.Sprintf("%s[%d]", path, i)
			d.pos[ip] = posOf(v)
			d.walk(v, t.Elem(), ip)
		}
	default:
		d.walkScalar(n, t, path, p)
	}
}

func (d *decoder) walkScalar(n ast.Node, t reflect.Type, path string, p position) {
	var ok bool
	want := ""
	hint := ""
	switch t.Kind() {
	case reflect.String:
		_, isScalar := n.(ast.ScalarNode)
		_, isMap := n.(*ast.MappingNode)
		_, isSeq := n.(*ast.SequenceNode)
		ok, want = isScalar && !isMap && !isSeq, "a string"
		if f, isFloat := n.(*ast.FloatNode); isFloat {
			d.text[f] = true
		}
	case reflect.Bool:
		_, ok = n.(*ast.BoolNode)
		want = "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		_, ok = n.(*ast.IntegerNode)
		want, hint = "an integer", wholeHint(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		var iv *ast.IntegerNode
		iv, ok = n.(*ast.IntegerNode)
		if ok {
			if s := fmt.Sprint(iv.Value); strings.HasPrefix(s, "-") {
				ok = false
			}
		}
		want, hint = "a non-negative integer", wholeHint(n)
	case reflect.Float32, reflect.Float64:
		// Numbers are YAML 1.2's (yamlcore): 1e-3, 1E-3, .5, +1e3.
		want = "a number"
		switch v := n.(type) {
		case *ast.IntegerNode:
			ok = true
		case *ast.FloatNode:
			ok = !math.IsInf(v.Value, 0) && !math.IsNaN(v.Value)
		}
		if _, isFloat := n.(*ast.FloatNode); (isFloat && !ok) || isInfOrNaN(n) {
			want, hint = "a finite number", "no key takes an infinity or NaN; a float is at most about 1.8e308"
		}
	default:
		return
	}
	if !ok {
		d.add(d.errorf(p, path, hint, "%s: expected %s, got %s", path, want, describe(n)))
	}
}

func isInfOrNaN(n ast.Node) bool {
	switch n.(type) {
	case *ast.InfinityNode, *ast.NanNode:
		return true
	}
	return false
}

// wholeHint says how to write a float given where an integer is wanted.
func wholeHint(n ast.Node) string {
	f, ok := n.(*ast.FloatNode)
	if !ok {
		return ""
	}
	if f.Value == math.Trunc(f.Value) && math.Abs(f.Value) < 1<<53 {
		return fmt.Sprintf("write it without a fraction or exponent: %d", int64(f.Value))
	}
	return "write a whole number"
}

// keywordsOf is the scalar keywords a struct type also takes
// (kind.Keyworded), or nil.
func keywordsOf(t reflect.Type) []string {
	if k, ok := reflect.New(t).Interface().(kind.Keyworded); ok {
		return k.Keywords()
	}
	return nil
}

// fieldsOf maps yaml key → struct field index for t.
func fieldsOf(t reflect.Type) (map[string]reflect.StructField, []string) {
	m := map[string]reflect.StructField{}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		m[tag] = f
		names = append(names, tag)
	}
	return m, names
}

// foreignFunc says, for a key the node's kind does not take, which kinds
// do: the message and hint, or ok false when none does.
type foreignFunc func(key string) (msg, hint string, ok bool)

func (d *decoder) walkStruct(n ast.Node, t reflect.Type, path string) {
	fields, names := fieldsOf(t)
	var foreign foreignFunc
	switch t {
	case stageType:
		foreign = d.stageKeys(n, path, fields, &names)
	case policyType:
		foreign = d.policyKeys(n, fields, &names)
	case trackerType:
		foreign = d.trackerKeys(n, fields, &names)
	case configType:
		// A kind with a section of its own (grpo: trainer) adds the
		// section's key to the top level.
		for _, k := range d.reg.Kinds {
			if sk, ok := k.(kind.Sectioned); ok {
				addField(fields, &names, sk.Section(), reflect.TypeOf(k.New()))
			}
		}
	}
	d.eachEntry(n, path, func(key string, kp position, v ast.Node) {
		kpath := join(path, key)
		f, ok := fields[key]
		if !ok {
			if what, isReserved := reserved[key]; isReserved && t == configType {
				e := d.errorf(kp, kpath, "remove it: this version does not read it",
					"section %q is not available yet (a later version adds it for %s)", key, what)
				e.kind = ErrReserved
				d.add(e)
				return
			}
			if foreign != nil {
				if msg, hint, ok := foreign(key); ok {
					d.add(d.errorf(kp, kpath, hint, "%s.%s: %s", path, key, msg))
					return
				}
			}
			d.add(d.errorf(kp, kpath, yamlcore.Suggest(key, names), "unknown key %q %s", key, where(path)))
			return
		}
		d.pos[kpath] = kp
		d.walk(v, f.Type, kpath)
	})
}

// eachEntry calls fn for each key of a mapping, reporting non-mappings,
// non-string keys and duplicates.
func (d *decoder) eachEntry(n ast.Node, path string, fn func(key string, kp position, v ast.Node)) {
	values, ok := mappingValues(n)
	if !ok {
		what := path
		if what == "" {
			what = "the file"
		}
		d.add(d.errorf(posOf(n), path, "write key: value lines or {key: value}", "%s: expected a mapping, got %s", what, describe(n)))
		return
	}
	seen := map[string]bool{}
	for _, mv := range values {
		if mv == nil || mv.Key == nil {
			continue
		}
		if _, merge := mv.Key.(*ast.MergeKeyNode); merge {
			continue // "<<: *anchor" merges keys checked at the anchor
		}
		kp := posOf(mv.Key)
		key, ok := keyString(mv.Key)
		if !ok {
			d.add(d.errorf(kp, path, "", "%s: keys must be plain strings", strings.TrimSpace(where(path))))
			continue
		}
		if seen[key] {
			d.add(d.errorf(kp, join(path, key), "", "duplicate key %q %s", key, where(path)))
			continue
		}
		seen[key] = true
		fn(key, kp, mv.Value)
	}
}

// mappingValues are the entries of a mapping node; ok is false for any
// other node.
func mappingValues(n ast.Node) (values []*ast.MappingValueNode, ok bool) {
	switch m := n.(type) {
	case *ast.MappingNode:
		return m.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{m}, true
	}
	return nil, false
}

func keyString(k ast.MapKeyNode) (string, bool) {
	switch v := k.(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.MappingKeyNode:
		if s, ok := v.Value.(*ast.StringNode); ok {
			return s.Value, true
		}
	case ast.ScalarNode:
		// a number or a boolean used as a key (an environment named 1)
		return fmt.Sprint(v.GetValue()), true
	}
	return "", false
}

func describe(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	}
	return scalarText(n)
}

func scalarText(n ast.Node) string {
	switch v := n.(type) {
	case *ast.StringNode:
		return fmt.Sprintf("%q", v.Value)
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		// As written: 1e3, not 1000; .inf, not +Inf.
		if tk := v.GetToken(); tk != nil && tk.Value != "" {
			return tk.Value
		}
		return fmt.Sprint(v.(ast.ScalarNode).GetValue())
	case ast.ScalarNode:
		return fmt.Sprint(v.GetValue())
	}
	return describe(n)
}

// yamlError turns an error of the YAML library into an *Error at the
// place of the mistake (yamlcore.Syntax).
func (d *decoder) yamlError(err error) error {
	se, ok := yamlcore.Syntax(err)
	if !ok {
		return &Error{File: d.file, Msg: err.Error()}
	}
	e := &Error{File: d.file, Line: se.Line, Column: se.Column, Msg: se.Msg, Hint: se.Hint}
	for path, p := range d.pos {
		if e.Line > 0 && p.line == e.Line && (e.Path == "" || len(path) > len(e.Path)) {
			e.Path = path
		}
	}
	if e.Path != "" {
		e.Msg = e.Path + ": " + e.Msg
	}
	return e
}

func documentBody(f *ast.File) ast.Node {
	for _, doc := range f.Docs {
		if doc != nil && doc.Body != nil {
			return doc.Body
		}
	}
	return nil
}

func docLine(doc *ast.DocumentNode) int {
	if doc == nil {
		return 0
	}
	if doc.Start != nil && doc.Start.Position != nil {
		return doc.Start.Position.Line
	}
	return posOf(doc.Body).line
}
