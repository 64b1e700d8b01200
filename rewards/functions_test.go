package rewards

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"testing"
)

const functionsSpec = `
functions:
  - name: accuracy
    function: rewards.py:accuracy
    python: .venv
    pure: true
components:
  - name: acc
    expr: functions.accuracy
  - name: short
    expr: 'num_tokens < 110 ? 1.0 : 0.0'
`

// TestFunctions: a function is called once per batch with the scored
// rows, its value is functions.NAME in CEL, and a row it does not score
// gets its status and reason, the others scored.
func TestFunctions(t *testing.T) {
	rows, prompts := testRows(40)
	idx, _ := NewPrompts(prompts)
	var calls, seen int
	accuracy := func(ctx context.Context, rs []Row, _ Memoizer) ([]FunctionResult, error) {
		calls++
		seen += len(rs)
		out := make([]FunctionResult, len(rs))
		for i, r := range rs {
			tr := r.Trajectory
			switch {
			case tr.PromptID == "p2" && tr.SampleIndex == 1:
				out[i] = FunctionResult{Status: StatusError, Reason: "function accuracy returned None: not scored"}
			case tr.PromptID == "p5" && tr.SampleIndex == 2:
				out[i] = FunctionResult{Status: StatusNonfinite, Reason: "function accuracy returned nan"}
			case tr.PromptID == "p6" && tr.SampleIndex == 0:
				out[i] = FunctionResult{Value: math.Inf(1), Status: StatusOK}
			case NumEqual(ExtractAnswer(tr.Completion), r.Prompt.Answer, 0):
				out[i] = FunctionResult{Value: 1, Status: StatusOK}
			default:
				out[i] = FunctionResult{Value: 0, Status: StatusOK}
			}
		}
		return out, nil
	}
	p := mustCompile(t, functionsSpec, WithFunction("accuracy", accuracy))
	got, sum := score(t, p, rows, &ScoreOptions{Prompts: idx, Concurrency: 1})
	if calls != 1 || seen != 30 {
		t.Fatalf("%d calls on %d rows, want one call on the 30 scored rows", calls, seen)
	}
	for i, r := range got {
		switch {
		case i%4 == 3:
			if r.Status != "skipped: timeout" || r.VerifierOutputs != "" {
				t.Errorf("row %d: %+v", i, r)
			}
		case i == 9:
			if r.Status != StatusError || deref(r.Error) != "function accuracy returned None: not scored" {
				t.Errorf("row 9: %+v %s", r, deref(r.Error))
			}
		case i == 22:
			if r.Status != StatusNonfinite || deref(r.Error) != "function accuracy returned nan" {
				t.Errorf("row 22: %+v %s", r, deref(r.Error))
			}
		case i == 24:
			if r.Status != StatusNonfinite || deref(r.Error) != "function accuracy: the value is +Inf" {
				t.Errorf("row 24: %+v %s", r, deref(r.Error))
			}
		default:
			want := 0.0
			if i%4 != 1 {
				want = 1
			}
			if r.Status != StatusOK || r.Components["acc"] != want {
				t.Errorf("row %d: %+v, want acc %v", i, r, want)
			}
		}
	}
	if sum.Scored != 27 || sum.Errors != 1 || sum.Nonfinite != 2 || sum.Components["acc"].Sum != 18 {
		t.Errorf("summary %+v", sum)
	}
	// Score, for one row, gives the same.
	r, err := p.Score(context.Background(), Row{Trajectory: rows[9], Prompt: prompts[2], HasPrompt: true}, nil)
	if err != nil || r.Status != StatusError || deref(r.Error) != "function accuracy returned None: not scored" {
		t.Fatalf("Score of row 9: %+v, %v", r, err)
	}
}

func TestFunctionsSpecErrors(t *testing.T) {
	const comps = "components:\n  - name: a\n    expr: '1.0'\n"
	for _, c := range []struct{ name, src, want string }{
		{"no name", "functions:\n  - function: r.py:f\n" + comps,
			"spec.yaml:2:5: functions[0]: name is missing"},
		{"no function", "functions:\n  - name: f\n" + comps,
			"spec.yaml:2:5: functions[0]: function is missing (e.g. function: rewards.py:accuracy)"},
		{"no function name", "functions:\n  - name: f\n    function: r.py\n" + comps,
			`spec.yaml:3:15: functions[0].function: "r.py" names no function (path/to/file.py:function or package.module:function)`},
		{"a path without .py", "functions:\n  - name: f\n    function: lib/r:f\n" + comps,
			`spec.yaml:3:15: functions[0].function: "lib/r:f": a file must end in .py (path/to/file.py:function or package.module:function)`},
		{"a bad module name", "functions:\n  - name: f\n    function: my-pkg.r:f\n" + comps,
			`spec.yaml:3:15: functions[0].function: "my-pkg.r:f": "my-pkg.r" is not a module name (path/to/file.py:function or package.module:function)`},
		{"a bad function name", "functions:\n  - name: f\n    function: r.py:f-1\n" + comps,
			`spec.yaml:3:15: functions[0].function: "r.py:f-1": "f-1" is not a Python name (path/to/file.py:function or package.module:function)`},
		{"pure not a bool", "functions:\n  - name: f\n    function: r.py:f\n    pure: yes please\n" + comps,
			`spec.yaml:4:11: functions[0].pure: expected true or false, found "yes please"`},
		{"workers zero", "functions:\n  - name: f\n    function: r.py:f\n    workers: 0\n" + comps,
			`spec.yaml:4:14: functions[0].workers: expected a whole number from 1 to 16, found "0" (e.g. workers: 2, about the cores scoring may use)`},
		{"workers a fraction", "functions:\n  - name: f\n    function: r.py:f\n    workers: 1.5\n" + comps,
			`spec.yaml:4:14: functions[0].workers: expected a whole number from 1 to 16, found "1.5" (e.g. workers: 2, about the cores scoring may use)`},
		{"workers too many", "functions:\n  - name: f\n    function: r.py:f\n    workers: 17\n" + comps,
			`spec.yaml:4:14: functions[0].workers: expected a whole number from 1 to 16, found "17" (e.g. workers: 2, about the cores scoring may use)`},
		{"workers a word", "functions:\n  - name: f\n    function: r.py:f\n    workers: all\n" + comps,
			`spec.yaml:4:14: functions[0].workers: expected a whole number from 1 to 16, found "all" (e.g. workers: 2, about the cores scoring may use)`},
		{"limits not a mapping", "functions:\n  - name: f\n    function: r.py:f\n    limits: 5s\n" + comps,
			`spec.yaml:4:13: functions[0].limits: expected a mapping, found "5s"`},
		{"limits unknown key", "functions:\n  - name: f\n    function: r.py:f\n    limits: {wal: 5s}\n" + comps,
			`spec.yaml:4:14: functions[0].limits: unknown key "wal" (did you mean "wall"?)`},
		{"limits wall not a duration", "functions:\n  - name: f\n    function: r.py:f\n    limits: {wall: 5}\n" + comps,
			`spec.yaml:4:20: functions[0].limits.wall: expected a positive duration, found "5" (a duration such as 30s or 2m)`},
		{"limits cpu_time negative", "functions:\n  - name: f\n    function: r.py:f\n    limits: {cpu_time: -1m}\n" + comps,
			`spec.yaml:4:24: functions[0].limits.cpu_time: expected a positive duration, found "-1m" (a duration such as 30s or 2m)`},
		{"limits memory too large", "functions:\n  - name: f\n    function: r.py:f\n    limits: {memory_mb: 2000000}\n" + comps,
			`spec.yaml:4:25: functions[0].limits.memory_mb: expected a whole number of MiB from 1 to 1048576, found "2000000" (e.g. memory_mb: 2048)`},
		{"unknown key", "functions:\n  - name: f\n    function: r.py:f\n    pyhton: .venv\n" + comps,
			`spec.yaml:4:5: functions[0]: unknown key "pyhton" (did you mean "python"?)`},
		{"conversational not a bool", "functions:\n  - name: f\n    function: r.py:f\n    conversational: 1\n" + comps,
			`spec.yaml:4:21: functions[0].conversational: expected true or false, found "1"`},
		{"columns not a mapping", "functions:\n  - name: f\n    function: r.py:f\n    columns: [answer]\n" + comps,
			`spec.yaml:4:14: functions[0].columns: expected a mapping, found a list`},
		{"a column that is not there", "functions:\n  - name: f\n    function: r.py:f\n    columns: {solution: answers}\n" + comps,
			`spec.yaml:4:25: functions[0].columns.solution: no column "answers" (one of answer, finish_reason, metadata, num_tokens, prompt_id, sample_index, source, split, status, or metadata.KEY)`},
		{"a keyword every function has", "functions:\n  - name: f\n    function: r.py:f\n    columns: {prompts: answer}\n" + comps,
			`spec.yaml:4:15: functions[0].columns: "prompts" is already an argument of every function`},
		{"a keyword that is not a name", "functions:\n  - name: f\n    function: r.py:f\n    columns: {gold-answer: answer}\n" + comps,
			`spec.yaml:4:15: functions[0].columns: "gold-answer" is not a Python name`},
		{"twice", "functions:\n  - {name: f, function: r.py:f}\n  - {name: f, function: r.py:g}\n" + comps,
			`spec.yaml:3:6: functions[1]: "f" declared twice`},
		{"undeclared in an expression", "functions:\n  - {name: f, function: r.py:f}\ncomponents:\n  - name: a\n    expr: functions.g\n",
			`spec.yaml:5:20: component "a": functions.g is not declared (the spec declares f)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := specErr(t, c.src)
			if err == nil || !errors.Is(err, ErrSpec) || err.Error() != c.want {
				t.Fatalf("got  %v\nwant %s", err, c.want)
			}
		})
	}
	s, err := ParseSpec("spec.yaml", []byte(functionsSpec))
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(s); err != nil {
		t.Fatalf("Check: %v", err)
	}
	_, err = Compile(s)
	if !errors.Is(err, ErrNoRunner) || err.Error() != `spec.yaml:3:5: function "accuracy" has no implementation (pass rewards.WithFunction)` {
		t.Fatalf("Compile without the function: %v", err)
	}
	f := s.Functions[0]
	if f.Name != "accuracy" || f.Function != "rewards.py:accuracy" || f.Python != ".venv" || !f.Pure || f.Keys["python"].Line != 5 {
		t.Fatalf("parsed %+v", f)
	}
}

// A spec without functions keeps its digest; a function's declaration
// changes it.
func TestFunctionsDigest(t *testing.T) {
	const base = "components:\n  - name: a\n    expr: '1.0'\n"
	digest := func(src string) string {
		s, err := ParseSpec("s", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return s.Digest()
	}
	// The canonical encoding of base as it was before the functions key
	// existed: no "functions" field.
	const before = `{"format":"rlpipe.rewards/v1","library":1,"components":[{"name":"a","expr":"1.0","weight":1}],` +
		`"total":"","statuses":["ok"],"verifiers":[],"judges":[]}`
	sum := sha256.Sum256([]byte(before))
	d := digest(base)
	if want := "sha256:" + hex.EncodeToString(sum[:]); d != want {
		t.Fatalf("the digest of a spec without functions is %s, was %s", d, want)
	}
	seen := map[string]bool{d: true}
	for _, src := range []string{
		base + "functions: [{name: f, function: r.py:f}]\n",
		base + "functions: [{name: f, function: r.py:g}]\n",
		base + "functions: [{name: f, function: r.py:f, pure: true}]\n",
		base + "functions: [{name: f, function: r.py:f, python: .venv}]\n",
		base + "functions: [{name: f, function: r.py:f, limits: {wall: 5s}}]\n",
		base + "functions: [{name: f, function: r.py:f, limits: {wall: 5s, memory_mb: 256}}]\n",
		base + "functions: [{name: f, function: r.py:f, conversational: true}]\n",
		base + "functions: [{name: f, function: r.py:f, columns: {solution: answer}}]\n",
		base + "functions: [{name: f, function: r.py:f, columns: {level: metadata.level}}]\n",
	} {
		got := digest(src)
		if seen[got] {
			t.Errorf("digest of\n%s is not new", src)
		}
		seen[got] = true
	}
}
