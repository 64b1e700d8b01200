package yamlcore_test

import (
	"testing"

	"github.com/rlpipe/rlpipe/internal/yamlcore"
)

// TestSyntax: a syntax error is placed at the mistake, not where the
// YAML library met it: an over-indented key on its own line (the library
// names the value on the line above), an unclosed flow list or mapping
// at its bracket (the library names the next key); other errors keep the
// library's place and message.
func TestSyntax(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      yamlcore.SyntaxError
	}{
		{"a key indented deeper than the key above", "run: a\neval:\n  k: 1\n   n: 4\n",
			yamlcore.SyntaxError{Line: 4, Column: 4, Msg: `key "n" is indented more than the key above it`,
				Hint: "line it up with the keys of its mapping, or indent it under a key that ends with ':'"}},
		{"after a longer value", "run: a\neval:\n  every: 10\n     max_tokens: 5\n",
			yamlcore.SyntaxError{Line: 4, Column: 6, Msg: `key "max_tokens" is indented more than the key above it`,
				Hint: "line it up with the keys of its mapping, or indent it under a key that ends with ':'"}},
		{"an unclosed list", "run: a\neval:\n  k: [1, 2\n  n: 4\n",
			yamlcore.SyntaxError{Line: 3, Column: 6, Msg: `"[" is not closed before line 4 (',' or ']' must be specified)`,
				Hint: `end the list or mapping with "]" on its line`}},
		{"an unclosed mapping", "run: a\npolicy: {kind: e, model: t\ntrainer: {lr: 2}\n",
			yamlcore.SyntaxError{Line: 2, Column: 9, Msg: `"{" is not closed before line 3 (',' or '}' must be specified)`,
				Hint: `end the list or mapping with "}" on its line`}},
		{"a second colon on one line stays", "run: a\nx: a: b\n",
			yamlcore.SyntaxError{Line: 2, Column: 4, Msg: "mapping value is not allowed in this context"}},
		{"a tab stays", "run: a\neval:\n\tk: 1\n",
			yamlcore.SyntaxError{Line: 3, Column: 1, Msg: "found character '\t' that cannot start any token"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := yamlcore.Parse([]byte(c.src))
			got, ok := yamlcore.Syntax(err)
			if !ok || got != c.want {
				t.Fatalf("Syntax(%v) = %+v, %v\nwant %+v", err, got, ok, c.want)
			}
		})
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"wall", "cpu_time", "memory_mb"}
	for _, c := range []struct{ key, want string }{
		{"wal", `did you mean "wall"?`},
		{"memroy_mb", `did you mean "memory_mb"?`},
		{"Wall", `did you mean "wall"?`},
		{"disk", "known keys: cpu_time, memory_mb, wall"},
	} {
		if got := yamlcore.Suggest(c.key, known); got != c.want {
			t.Errorf("Suggest(%q) = %q, want %q", c.key, got, c.want)
		}
	}
}

func TestWhere(t *testing.T) {
	for _, c := range []struct {
		line, col int
		want      string
	}{{0, 0, "f.yaml"}, {3, 0, "f.yaml:3"}, {3, 7, "f.yaml:3:7"}} {
		if got := yamlcore.Where("f.yaml", c.line, c.col); got != c.want {
			t.Errorf("Where(%d, %d) = %q, want %q", c.line, c.col, got, c.want)
		}
	}
}

func TestPosition(t *testing.T) {
	f, err := yamlcore.Parse([]byte("run: a\neval:\n  k: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if l, c := yamlcore.Position(f.Docs[0].Body); l != 1 || c != 4 {
		t.Errorf("Position(body) = %d, %d, want 1, 4 (the first key's colon)", l, c)
	}
	if l, c := yamlcore.Position(nil); l != 0 || c != 0 {
		t.Errorf("Position(nil) = %d, %d, want 0, 0", l, c)
	}
}
