package rewards

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// specErr parses and checks src and returns the error text.
func specErr(t *testing.T, src string) error {
	t.Helper()
	s, err := ParseSpec("spec.yaml", []byte(src))
	if err != nil {
		return err
	}
	return Check(s)
}

// TestBadSpecs: each bad spec fails with the file, line and column of the
// problem and the component it is in.
func TestBadSpecs(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{
			name: "unknown variable",
			src:  "components:\n  - name: a\n    expr: 'completoin.size() > 0 ? 1.0 : 0.0'\n",
			want: []string{`spec.yaml:3:12: component "a": undeclared reference to 'completoin'`},
		},
		{
			name: "unknown function",
			src:  "components:\n  - name: a\n    expr: 'extract(completion) == answer ? 1.0 : 0.0'\n",
			want: []string{`spec.yaml:3:19: component "a": undeclared reference to 'extract'`},
		},
		{
			name: "type error",
			src:  "components:\n  - name: ok\n    expr: '1.0'\n  - name: a\n    expr: 'num_tokens + completion'\n",
			want: []string{`spec.yaml:5:23: component "a": found no matching overload for '_+_' applied to '(int, string)'`},
		},
		{
			name: "type error in a block",
			src:  "components:\n  - name: a\n    expr: |\n      completion.contains(\"x\")\n        ? 1.0\n        : \"no\"\n",
			want: []string{`spec.yaml:5:9: component "a": found no matching overload for '_?_:_'`},
		},
		{
			name: "result not a number",
			src:  "components:\n  - name: a\n    expr: extract_answer(completion)\n",
			want: []string{`spec.yaml:3:11: component "a": the expression gives string, want a number`},
		},
		{
			name: "weight not a number",
			src:  "components:\n  - name: a\n    expr: '1.0'\n    weight: high\n",
			want: []string{`spec.yaml:4:13: component "a": weight must be a number, found "high"`},
		},
		{
			name: "weight out of range",
			src:  "components:\n  - name: a\n    expr: '1.0'\n    weight: 1e400\n",
			want: []string{`spec.yaml:4:13: component "a": weight must be a finite number`},
		},
		{
			name: "weight quoted",
			src:  "components:\n  - name: a\n    expr: '1.0'\n    weight: '1e-3'\n",
			want: []string{`spec.yaml:4:13: component "a": weight must be a number, found "'1e-3'"`},
		},
		{
			name: "total references a missing component",
			src:  "components:\n  - name: correct\n    expr: '1.0'\ntotal: 'correct * (1.0 + format)'\n",
			want: []string{`spec.yaml:4:26: total: undeclared reference to 'format'`},
		},
		{
			name: "weight with a total",
			src:  "components:\n  - name: a\n    expr: '1.0'\n    weight: 2\ntotal: 'a'\n",
			want: []string{`spec.yaml:2:5: component "a": weight has no effect when total is an expression`},
		},
		{
			name: "duplicate component names",
			src:  "components:\n  - name: a\n    expr: '1.0'\n  - name: a\n    expr: '2.0'\n",
			want: []string{`spec.yaml:4:11: component "a": declared twice (first at line 2)`},
		},
		{
			name: "empty components",
			src:  "components: []\n",
			want: []string{`spec.yaml:1:1: components is empty`},
		},
		{
			name: "no components",
			src:  "total: '1.0'\n",
			want: []string{`spec.yaml: no components`},
		},
		{
			name: "empty file",
			src:  "# nothing\n",
			want: []string{`spec.yaml: the spec is empty`},
		},
		{
			name: "unknown key with a hint",
			src:  "components:\n  - name: a\n    exp: '1.0'\n",
			want: []string{`spec.yaml:3:5: components[0]: unknown key "exp" (did you mean "expr"?)`, `component "a": expr is missing`},
		},
		{
			name: "bad name",
			src:  "components:\n  - name: Correct\n    expr: '1.0'\n",
			want: []string{`spec.yaml:2:11: components[0]: name "Correct" is not a valid name`},
		},
		{
			name: "name taken by a variable",
			src:  "components:\n  - name: answer\n    expr: '1.0'\n",
			want: []string{`name "answer" is taken by a CEL variable or keyword`},
		},
		{
			name: "undeclared verifier",
			src:  "components:\n  - name: a\n    expr: 'verifiers.tests.passed ? 1.0 : 0.0'\n",
			want: []string{`spec.yaml:3:21: component "a": verifiers.tests is not declared (declare it under verifiers)`},
		},
		{
			name: "unknown verifier field",
			src:  "verifiers: [{name: tests}]\ncomponents:\n  - name: a\n    expr: 'verifiers.tests.pased ? 1.0 : 0.0'\n",
			want: []string{`undefined field 'pased'`},
		},
		{
			name: "bad constant regex",
			src:  "components:\n  - name: a\n    expr: 'regex_find(completion, \"(\") == \"\" ? 1.0 : 0.0'\n",
			want: []string{`spec.yaml:3:11: component "a": regex_find: error parsing regexp: missing closing )`},
		},
		{
			name: "regex group out of range",
			src:  "components:\n  - name: a\n    expr: 'regex_extract(completion, \"a(b)\", 2) == \"\" ? 1.0 : 0.0'\n",
			want: []string{`regex_extract: group 2 out of range`},
		},
		{
			name: "unknown status",
			src:  "statuses: [ok, done]\ncomponents:\n  - name: a\n    expr: '1.0'\n",
			want: []string{`spec.yaml:1:16: statuses: unknown trajectory status "done"`},
		},
		{
			name: "not yaml",
			src:  "components: [\n",
			want: []string{`spec.yaml:`, `not valid YAML`},
		},
		{
			name: "an over-indented key",
			src:  "components:\n  - name: a\n     expr: '1.0'\n",
			want: []string{`spec.yaml:3:6: not valid YAML: key "expr" is indented more than the key above it (line it up with the keys of its mapping, or indent it under a key that ends with ':')`},
		},
		{
			name: "several problems at once",
			src:  "components:\n  - name: a\n    expr: 'nope'\n  - name: b\n    expr: 'alsonope'\n",
			want: []string{`spec.yaml:3:12: component "a": undeclared reference to 'nope'`, `spec.yaml:5:12: component "b": undeclared reference to 'alsonope'`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := specErr(t, tt.src)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrSpec) || !errors.Is(err, artifacts.ErrInvalid) {
				t.Errorf("error %v is not ErrSpec and ErrInvalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain\n%s", err, w)
				}
			}
		})
	}
}

func TestMissingRunner(t *testing.T) {
	s, err := ParseSpec("spec.yaml", []byte("verifiers: [{name: tests, image: python}]\ncomponents:\n  - name: a\n    expr: 'verifiers.tests.passed ? 1.0 : 0.0'\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(s); err != nil {
		t.Fatalf("Check: %v", err)
	}
	_, err = Compile(s)
	if !errors.Is(err, ErrNoRunner) || !strings.Contains(err.Error(), `spec.yaml:1:14: verifier "tests" has no implementation`) {
		t.Fatalf("Compile: %v, want ErrNoRunner with a position", err)
	}
}

func TestSpecDefaults(t *testing.T) {
	s, err := ParseSpec("s", []byte("components:\n  - {name: a, expr: '1.0'}\n  - {name: b, expr: 'true', weight: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Components[0].Weight != 1 || s.Components[1].Weight != 3 {
		t.Errorf("weights %v, %v", s.Components[0].Weight, s.Components[1].Weight)
	}
	if len(s.Statuses) != 1 || s.Statuses[0] != "ok" {
		t.Errorf("statuses %v", s.Statuses)
	}
	if got := s.ComponentNames(); strings.Join(got, ",") != "a,b" {
		t.Errorf("names %v", got)
	}
}

// TestSpecNumbers: weights are numbers of YAML 1.2, as in a pipeline
// file: 1e-3, 1E-1, +2e0 and .5 are floats.
func TestSpecNumbers(t *testing.T) {
	for _, c := range []struct {
		text string
		want float64
	}{
		{"1e-3", 1e-3}, {"1E-1", 0.1}, {"+2e0", 2}, {".5", 0.5}, {"-2.5e-4", -2.5e-4}, {"3", 3},
	} {
		t.Run(c.text, func(t *testing.T) {
			s, err := ParseSpec("s", []byte("components:\n  - {name: a, expr: '1.0', weight: "+c.text+"}\n"))
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Components[0].Weight; got != c.want {
				t.Errorf("weight: %s read as %g, want %g", c.text, got, c.want)
			}
		})
	}
}

func TestDigest(t *testing.T) {
	base := "components:\n  - name: a\n    expr: 'completion.contains(\"x\") ? 1.0 : 0.0'\n    weight: 1\n"
	same := []string{
		"# a comment\n" + base,
		"components:\n- {weight: 1.0, expr: \"completion.contains(\\\"x\\\") ? 1.0 : 0.0\", name: a}\n",
		"components:\n  - name: a\n    expr: |\n      completion.contains(\"x\") ? 1.0 : 0.0\n",
		base + "statuses: [ok]\n",
		strings.Replace(base, "weight: 1", "weight: 1e0", 1),
	}
	different := []string{
		strings.Replace(base, "weight: 1", "weight: 2", 1),
		strings.Replace(base, `"x"`, `"y"`, 1),
		base + "total: 'a * 2.0'\n",
		base + "statuses: [ok, truncated]\n",
		base + "verifiers: [{name: v, timeout: 5}]\n",
	}
	digest := func(src string) string {
		s, err := ParseSpec("s", []byte(src))
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		return s.Digest()
	}
	want := digest(base)
	if !strings.HasPrefix(want, "sha256:") || len(want) != len("sha256:")+64 {
		t.Fatalf("digest %q", want)
	}
	for _, src := range same {
		if got := digest(src); got != want {
			t.Errorf("digest of\n%s= %s, want %s", src, got, want)
		}
	}
	seen := map[string]bool{want: true}
	for _, src := range different {
		got := digest(src)
		if seen[got] {
			t.Errorf("digest of\n%s is not new", src)
		}
		seen[got] = true
	}
}

func TestLoadSpecFile(t *testing.T) {
	s, err := LoadSpec("testdata/gsm8k.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(s); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSpec("testdata/missing.yaml"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{
		"components:\n  - name: a\n    expr: '1.0'\n",
		"components:\n  - name: a\n    expr: |\n      1.0\n    weight: .nan\n",
		"verifiers: [{name: v, x: [1, {a: b}]}]\ncomponents: [{name: a, expr: 'verifiers.v.passed'}]\n",
		"total: &x 'a'\ncomponents: [{name: a, expr: *x}]\n",
		"components: !!map {}\n",
		"judges: [{name: j, t: .nan, m: {1: 2}}]\ncomponents: [{name: a, expr: '1.0'}]\n",
		"judges: [{name: j, temperature: 1e-3, max_tokens: 1E3, x: [+.inf, 1e400]}]\ncomponents: [{name: a, expr: 1e0, weight: 1e-3}]\n",
		"---\n---\n",
		"{",
		"correct: a\ncomponents: [{name: a, expr: '1.0'}]\n",
		"components: [{name: a, expr: '1.0'}]\ncorrect: {component: a, above: -1e3, at_least: .nan}\n",
		"correct: {at_least: !!str 1}\ncomponents: [{name: a, expr: '1.0'}]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSpec("fuzz.yaml", data)
		if err != nil {
			if !errors.Is(err, ErrSpec) {
				t.Fatalf("error %v is not ErrSpec", err)
			}
			return
		}
		_ = s.Digest()
		_ = Check(s)
		if r := s.Correctness(); !tables.Finite(r.Threshold) {
			t.Fatalf("rule %+v has a threshold that is not finite", r)
		}
	})
}
