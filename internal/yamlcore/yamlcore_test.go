package yamlcore_test

import (
	"context"
	"math"
	"reflect"
	"regexp"
	"testing"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/rlpipe/rlpipe/internal/yamlcore"
)

// TestResolve reads one value per case, as `v: TEXT`, and checks the
// node and the value every decoder then sees.
func TestResolve(t *testing.T) {
	inf := math.Inf(1)
	for _, c := range []struct {
		name, text string
		want       any // float64, int64/uint64, string, bool
	}{
		{"exponent without a dot", "1e-3", 1e-3},
		{"upper-case exponent", "1E-3", 1e-3},
		{"signed mantissa and exponent", "-2.5e-4", -2.5e-4},
		{"plus sign", "+1e3", 1000.0},
		{"no fraction digits", "1.e2", 100.0},
		{"leading dot", ".5", 0.5},
		{"signed leading dot", "-.5", -0.5},
		{"a TRL learning rate", "1e-6", 1e-6},
		{"with a dot, as the library reads it", "2.0e-3", 2e-3},
		{"out of range is an infinity", "1e400", inf},
		{"out of range with a dot too", "1.0e400", inf},
		{"plus infinity", "+.inf", inf},
		{"infinity", ".inf", inf},
		{"underflow is zero", "1e-400", 0.0},
		{"integer", "12", uint64(12)},
		{"negative integer", "-3", int64(-3)},
		{"hex integer", "0x1F", uint64(31)},
		{"leading zero stays the library's", "09", "09"},
		{"a word", "fast", "fast"},
		{"two dots", "1.2.3", "1.2.3"},
		{"exponent without digits", "1e", "1e"},
		{"hex float is not core", "0x1p-2", "0x1p-2"},
		{"python inf is not core", "inf", "inf"},
		{"nan spelled as go reads it", "NaN", "NaN"},
		{"a version", "v1e3", "v1e3"},
		{"double-quoted", `"1e-3"`, "1e-3"},
		{"single-quoted", `'1e-3'`, "1e-3"},
		{"tagged a string", "!!str 1e-3", "1e-3"},
		{"bool", "true", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got map[string]any
			if err := yamlcore.Unmarshal([]byte("v: "+c.text+"\n"), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got["v"], c.want) {
				t.Errorf("v: %s read as %#v (%T), want %#v (%T)", c.text, got["v"], got["v"], c.want, c.want)
			}
		})
	}
}

// TestResolveEverywhere: numbers are resolved in block and flow
// mappings and sequences, under anchors and merge keys, and in typed
// fields, free-form maps and aliases alike; keys are left as written.
func TestResolveEverywhere(t *testing.T) {
	src := `
trainer: {lr: 1e-3, betas: [9e-1, 999e-3]}
list:
  - 1e-6
  - {x: 2E2}
base: &b {wd: 1e-2}
merged: {<<: *b, lr: 5e-5}
again: *b
1e3: key
`
	var got map[string]any
	if err := yamlcore.Unmarshal([]byte(src), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"trainer": map[string]any{"lr": 1e-3, "betas": []any{0.9, 0.999}},
		"list":    []any{1e-6, map[string]any{"x": 200.0}},
		"base":    map[string]any{"wd": 1e-2},
		"merged":  map[string]any{"wd": 1e-2, "lr": 5e-5},
		"again":   map[string]any{"wd": 1e-2},
		"1e3":     "key",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}

	var typed struct {
		Trainer struct {
			LR    float64   `yaml:"lr"`
			Betas []float32 `yaml:"betas"`
		} `yaml:"trainer"`
	}
	if err := yamlcore.Unmarshal([]byte(src), &typed); err != nil {
		t.Fatal(err)
	}
	if typed.Trainer.LR != 1e-3 || !reflect.DeepEqual(typed.Trainer.Betas, []float32{0.9, 0.999}) {
		t.Errorf("typed: %+v", typed)
	}
}

// TestText: a resolved node keeps the text it was written as; a number
// the library read itself, and a string, have none.
func TestText(t *testing.T) {
	f, err := yamlcore.Parse([]byte("[1e3, 1.5, 7, x]"))
	if err != nil {
		t.Fatal(err)
	}
	seq := f.Docs[0].Body.(*ast.SequenceNode)
	var texts []string
	for _, v := range seq.Values {
		s, ok := yamlcore.Text(v)
		if !ok {
			s = "-"
		}
		texts = append(texts, s)
	}
	if want := []string{"1e3", "-", "-", "-"}; !reflect.DeepEqual(texts, want) {
		t.Errorf("texts %q, want %q", texts, want)
	}
	// Decode reads a node of the file.
	var v []any
	if err := yamlcore.Decode(context.Background(), seq, &v); err != nil {
		t.Fatal(err)
	}
	if want := []any{1000.0, 1.5, uint64(7), "x"}; !reflect.DeepEqual(v, want) {
		t.Errorf("decoded %#v, want %#v", v, want)
	}
}

// FuzzParse: whatever the library parses, Parse parses without a panic,
// and every node it resolved was written as a core-schema float.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"lr: 1e-3\n", "[1e400, .5, +.inf, '1e3']", "a: &x {b: 1E2}\nc: *x\n", "- !!str 1e3\n- 2e2\n"} {
		f.Add([]byte(s))
	}
	core := regexp.MustCompile(`^[-+]?((\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|\.(inf|Inf|INF))$`)
	f.Fuzz(func(t *testing.T, data []byte) {
		if libraryPanics(data) {
			return // the library's own, which its callers recover
		}
		file, err := yamlcore.Parse(data)
		if err != nil {
			return
		}
		for _, doc := range file.Docs {
			ast.Walk(visitor(func(n ast.Node) {
				if text, ok := yamlcore.Text(n); ok && !core.MatchString(text) {
					t.Errorf("%q resolved to a float", text)
				}
			}), doc)
		}
	})
}

func libraryPanics(data []byte) (panicked bool) {
	defer func() { panicked = recover() != nil }()
	_, _ = parser.ParseBytes(data, 0)
	return false
}

type visitor func(ast.Node)

func (v visitor) Visit(n ast.Node) ast.Visitor {
	v(n)
	return v
}
