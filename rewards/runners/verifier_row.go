package runners

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/python"
	"github.com/rlpipe/rlpipe/sandbox"
)

// templateFields are the fields a verifier's templates may read
// (fileData's), with what each is, for messages.
var templateFields = []struct{ name, what string }{
	{"Prompt", "the prompt's text"},
	{"Completion", "the completion"},
	{"Answer", "the reference answer"},
	{"Code", "the completion's first fenced code block"},
	{"Row", "the row's dataset columns as one JSON object"},
	{"Metadata", "the prompt's metadata as its text"},
}

// keyError is a problem with the value of the key at path below the
// verifier ("files.row.json", "python"), for the spec error's position.
type keyError struct{ at, msg string }

func (e *keyError) Error() string { return e.msg }

// reads is what a verifier's templates read of a row beyond the text
// fields: each costs work per row, done only when read.
type reads struct{ row, metadata bool }

// checkFields reports the first field t reads that fileData does not
// have, as a keyError at path, and notes in r the fields that cost work.
// A template that reads no such field renders as it did before .Row and
// .Metadata existed.
func checkFields(t *template.Template, path, label string, r *reads) error {
	var bad string
	for _, tt := range t.Templates() {
		if tt.Tree == nil {
			continue
		}
		walk(tt.Tree.Root, func(ident []string) {
			switch {
			case bad != "":
			case !knownField(ident[0]):
				bad = fmt.Sprintf("%s reads .%s, which is not a field; the fields are %s", label, ident[0], fieldList())
			case len(ident) > 1:
				bad = fmt.Sprintf("%s reads .%s: .%s is text, with no field %s; pass {{.%s}} to a file and parse it there",
					label, strings.Join(ident, "."), ident[0], ident[1], ident[0])
			case ident[0] == "Row":
				r.row = true
			case ident[0] == "Metadata":
				r.metadata = true
			}
		})
	}
	if bad != "" {
		return &keyError{at: path, msg: bad}
	}
	return nil
}

func knownField(name string) bool {
	for _, f := range templateFields {
		if f.name == name {
			return true
		}
	}
	return false
}

func fieldList() string {
	var b strings.Builder
	for i, f := range templateFields {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, ".%s (%s)", f.name, f.what)
	}
	return b.String()
}

// walk calls field with the identifiers of every field a template's tree
// reads from its data: {{.Row}} is ["Row"], {{$.Row.x}} ["Row", "x"].
func walk(n parse.Node, field func([]string)) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			walk(c, field)
		}
	case *parse.ActionNode:
		walk(n.Pipe, field)
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, c := range n.Cmds {
			walk(c, field)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			walk(a, field)
		}
	case *parse.FieldNode:
		field(n.Ident)
	case *parse.DotNode:
		// {{.}} or {{printf "%v" .}} may print every field.
		field([]string{"Row"})
		field([]string{"Metadata"})
	case *parse.VariableNode:
		switch {
		case len(n.Ident) > 1 && n.Ident[0] == "$":
			field(n.Ident[1:])
		case len(n.Ident) == 1 && n.Ident[0] == "$":
			field([]string{"Row"})
			field([]string{"Metadata"})
		}
	case *parse.ChainNode:
		walk(n.Node, field)
	case *parse.IfNode:
		walkBranch(&n.BranchNode, field)
	case *parse.RangeNode:
		walkBranch(&n.BranchNode, field)
	case *parse.WithNode:
		walkBranch(&n.BranchNode, field)
	case *parse.TemplateNode:
		walk(n.Pipe, field)
	}
}

func walkBranch(n *parse.BranchNode, field func([]string)) {
	walk(n.Pipe, field)
	walk(n.List, field)
	walk(n.ElseList, field)
}

// rowData fills d's .Row and .Metadata from row when the templates read
// them.
func (r reads) rowData(d *fileData, row *rewards.Row) error {
	if r.metadata {
		d.Metadata = row.Prompt.Metadata
	}
	if !r.row {
		return nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(row.Columns()); err != nil {
		return fmt.Errorf("encode the row's columns for .Row: %w", err)
	}
	d.Row = strings.TrimSuffix(b.String(), "\n")
	return nil
}

// memoKey adds to a verifier's memo key what its templates read of the
// row beyond the text fields; a key without them is what it was before
// they existed.
func (r reads) memoKey(key map[string]any, d *fileData) {
	if r.row {
		key["row"] = d.Row
	}
	if r.metadata {
		key["metadata"] = d.Metadata
	}
}

// findPython finds a verifier's python: (relative to the spec's
// directory dir) when the spec is compiled; the error is at the key.
func findPython(ctx context.Context, dir, path string) (*python.Interpreter, error) {
	if path == "" {
		return nil, nil
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	in, err := python.Find(ctx, path)
	if err != nil {
		return nil, &keyError{at: "python", msg: "python: " + err.Error()}
	}
	return &in, nil
}

// withPython makes the interpreter in visible in s, read-only, as a
// Python function's worker sees it (python.Interpreter's Binds and
// Mounts), and first on PATH, so that python3 in a command is in's.
func withPython(s sandbox.Spec, in *python.Interpreter) sandbox.Spec {
	if in == nil {
		return s
	}
	s.ReadOnlyBinds = append(s.ReadOnlyBinds, in.Binds...)
	if len(in.Mounts) > 0 {
		s.ReadOnlyMounts = map[string]string{}
		for k, v := range in.Mounts {
			s.ReadOnlyMounts[k] = v
		}
	}
	s.Env = map[string]string{"PATH": filepath.Dir(in.Command) + ":" + sandbox.DefaultPath}
	return s
}
