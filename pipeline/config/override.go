package config

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/rlpipe/rlpipe/internal/yamlcore"
	"github.com/rlpipe/rlpipe/pipeline"
)

// ErrOverride marks a command-line override that is not key.path=value
// or whose value is not YAML.
var ErrOverride = fmt.Errorf("%w: bad override", pipeline.ErrConfig)

// override is one key.path=value of the command line, merged into the
// file's YAML tree before the tree is checked: its nodes are parsed on
// lines [first, last] past the file's, so that a problem found at one of
// them names the override rather than a place in the file.
type override struct {
	text        string   // as given: stages.train.lr=1e-6
	keys        []string // stages, train, lr
	file        string   // the file it overrides
	first, last int
}

// path is the override's key as the config's paths spell it.
func (o override) path() string { return strings.Join(o.keys, ".") }

// covers reports whether path is the override's key or below it.
func (o override) covers(path string) bool {
	p := o.path()
	return path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[")
}

// applyOverrides merges each of texts (key.path=value) into the file's
// tree body, in order: a later override of the same key wins. A key's
// value is replaced whole (a mapping too); missing parents are added.
// file names the file and line is its last line.
func applyOverrides(body ast.Node, texts []string, file string, line int) (ast.Node, []override, error) {
	var ovs []override
	for _, text := range texts {
		key, value, ok := strings.Cut(text, "=")
		keys := strings.Split(key, ".")
		if !ok || key == "" || strings.TrimSpace(value) == "" || hasEmpty(keys) {
			return nil, nil, &Error{Override: text, Msg: "write key.path=value, e.g. stages.train.lr=1e-6 or eval.k=[1,4]; a value of null unsets the key", kind: ErrOverride}
		}
		o := override{text: text, keys: keys, first: line + 2, file: file}
		pad := strings.Repeat("\n", o.first-1)
		v, err := yamlcore.Parse([]byte(pad + value))
		if err != nil {
			msg := err.Error()
			if se, ok := yamlcore.Syntax(err); ok {
				msg = se.Msg
			}
			return nil, nil, &Error{Override: text, Msg: "the value is not YAML: " + msg, Hint: `quote a string that holds ":", "#", "{" or "[", e.g. 'key="a: b"'`, kind: ErrOverride}
		}
		var skel strings.Builder
		skel.WriteString(pad)
		for i, k := range keys {
			fmt.Fprintf(&skel, "%s%s:\n", strings.Repeat("  ", i), strconv.Quote(k))
		}
		s, err := yamlcore.Parse([]byte(skel.String()))
		if err != nil {
			return nil, nil, &Error{Override: text, Msg: "the key is not YAML: " + err.Error(), kind: ErrOverride}
		}
		entry := firstEntry(documentBody(s))
		leaf := entry
		for range keys[1:] {
			leaf = firstEntry(leaf.Value)
		}
		leaf.Value = documentBody(v)
		if leaf.Value == nil {
			leaf.Value = ast.Null(nil)
		}
		o.last = o.first + max(len(keys), bytes.Count([]byte(value), []byte("\n"))+1)
		line = o.last
		if body, err = merge(body, entry, keys, o); err != nil {
			return nil, nil, err
		}
		ovs = append(ovs, o)
	}
	return body, ovs, nil
}

func hasEmpty(keys []string) bool {
	for _, k := range keys {
		if strings.TrimSpace(k) == "" {
			return true
		}
	}
	return false
}

// firstEntry is the one entry of a skeleton's mapping.
func firstEntry(n ast.Node) *ast.MappingValueNode {
	values, _ := mappingValues(n)
	return values[0]
}

// merge puts entry (keys[0]: …) into the mapping n, replacing the entry
// of the same key or descending into it while keys go deeper; it returns
// the mapping, new when n was a single entry.
func merge(n ast.Node, entry *ast.MappingValueNode, keys []string, o override) (ast.Node, error) {
	n = unwrap(n)
	values, ok := mappingValues(n)
	if !ok {
		if _, null := n.(*ast.NullNode); n != nil && !null {
			at := strings.Join(o.keys[:len(o.keys)-len(keys)], ".")
			line, col := yamlcore.Position(n)
			return nil, &Error{Override: o.text, Msg: fmt.Sprintf("%s is %s at %s, not a mapping", at, describe(n), yamlcore.Where(o.file, line, col)),
				Hint: "set it whole: " + at + "={…} or " + at + "=[…]", kind: ErrOverride}
		}
		return ast.Mapping(entry.GetToken(), false, entry), nil
	}
	for i, mv := range values {
		if mv == nil || mv.Key == nil {
			continue
		}
		if k, ok := keyString(mv.Key); !ok || k != keys[0] {
			continue
		}
		if len(keys) == 1 {
			values[i] = entry
			return n, nil
		}
		sub, err := merge(mv.Value, firstEntry(entry.Value), keys[1:], o)
		if err != nil {
			return nil, err
		}
		mv.Value = sub
		return n, nil
	}
	if m, ok := n.(*ast.MappingNode); ok {
		m.Values = append(m.Values, entry)
		return m, nil
	}
	return ast.Mapping(n.GetToken(), false, append(values, entry)...), nil
}

// markOverrides makes each *Error in err that is at an override (its
// path, or a line of its nodes) name that override instead of the file.
func markOverrides(err error, ovs []override) error {
	if len(ovs) == 0 || err == nil {
		return err
	}
	var each func(error)
	each = func(err error) {
		if e, ok := err.(*Error); ok {
			markOverride(e, ovs)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				each(x)
			}
		}
	}
	each(err)
	return err
}

func markOverride(e *Error, ovs []override) {
	if e.Override != "" {
		return
	}
	for i := len(ovs) - 1; i >= 0; i-- {
		o := ovs[i]
		if (e.Path != "" && o.covers(e.Path)) || (e.Line >= o.first && e.Line <= o.last) {
			e.Override, e.Line, e.Column = o.text, 0, 0
			return
		}
	}
}
