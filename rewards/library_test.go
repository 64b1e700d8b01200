package rewards

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
)

// evalCEL evaluates expr in the reward environment with the given
// variables.
func evalCEL(t *testing.T, expr string, vars map[string]any) (any, error) {
	t.Helper()
	env, err := NewEnv()
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	prg, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, err
	}
	out, _, err := prg.Eval(vars)
	if err != nil {
		return nil, err
	}
	if out == types.NullValue {
		return nil, nil
	}
	v, err := out.ConvertToNative(reflect.TypeFor[any]())
	if err != nil {
		return out.Value(), nil
	}
	return v, nil
}

func TestLibrary(t *testing.T) {
	c := map[string]any{
		"completion": "Let me think. 3 + 4 = 7, so \\boxed{7}. Then #### 7",
		"answer":     "7.0",
		"metadata":   map[string]any{"difficulty": 3},
	}
	tests := []struct {
		name string
		expr string
		want any
	}{
		{"extract_answer", `extract_answer(completion)`, "7"},
		{"extract_boxed", `extract_boxed("\\boxed{a{b}}")`, "a{b}"},
		{"last_number", `last_number("x 1,000 y")`, "1,000"},
		{"parse_number", `parse_number("$1,234.50")`, 1234.5},
		{"is_number", `is_number("12 km") && !is_number("twelve")`, true},
		{"num_equal strings", `num_equal(extract_answer(completion), answer, 1e-6)`, true},
		{"num_equal mixed", `num_equal("1,000", 1000)`, true},
		{"num_equal int and double", `num_equal(3, 3.0000001, 1e-3)`, true},
		{"num_equal unparseable", `num_equal("seven", answer, 1e-6)`, false},
		{"num_equal not a number type", `num_equal([1], 1)`, false},
		{"regex_find", `regex_find(completion, "[0-9]+ \\+ [0-9]+")`, "3 + 4"},
		{"regex_find no match", `regex_find(completion, "z+")`, ""},
		{"regex_find pattern from a variable", `regex_find("abc", answer.replace("7.0", "b+"))`, "b"},
		{"regex_extract", `regex_extract(completion, "= ([0-9]+)", 1)`, "7"},
		{"regex_extract whole match", `regex_extract(completion, "= ([0-9]+)", 0)`, "= 7"},
		{"regex_extract no match", `regex_extract(completion, "q(x)", 1)`, ""},
		{"regex_extract unmatched group", `regex_extract("ab", "a(x)?b", 1)`, ""},
		{"json_get", `json_get("{\"a\":{\"b\":[1,2,{\"c\":\"d\"}]}}", "a.b.2.c")`, "d"},
		{"json_get number", `json_get("{\"a\":[1.5]}", "a.0")`, 1.5},
		{"json_get missing", `json_get("{\"a\":1}", "b") == null`, true},
		{"json_get not json", `json_get("nope", "a") == null`, true},
		{"json_get whole", `json_get("[1,2]", "").size()`, int64(2)},
		{"count", `count(completion, "7")`, int64(3)},
		{"repetition_ratio", `repetition_ratio("a b c d a b c d")`, 0.2},
		{"repetition_ratio n", `repetition_ratio("a b a b", 2)`, 1.0 / 3.0},
		{"metadata", `metadata.difficulty > 2`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := evalCEL(t, tt.expr, c)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%s = %#v, want %#v", tt.expr, got, tt.want)
			}
		})
	}
}

func TestLibraryErrors(t *testing.T) {
	tests := []struct {
		name string
		expr string
		want string
	}{
		{"parse_number of text", `parse_number("seven")`, `parse_number: "seven" is not a number`},
		{"bad pattern from a variable", `regex_find("a", completion)`, "error parsing regexp"},
		{"group from a variable out of range", `regex_extract("ab", "a(b)", size(completion))`, "group 2 out of range"},
		{"repetition_ratio n", `repetition_ratio("a", 0)`, "n = 0, want 1 to 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := evalCEL(t, tt.expr, map[string]any{"completion": "(["})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%s: error %v, want %q", tt.expr, err, tt.want)
			}
		})
	}
}

// TestRegexCompiledOnce: a constant pattern is compiled when the program
// is built, never per row; a pattern from data goes through the bounded
// cache.
func TestRegexCompiledOnce(t *testing.T) {
	env, err := NewEnv(WithLibrary(RegexCache(2)))
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(`regex_find(completion, "a+") + regex_find(completion, answer)`)
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	prg, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range []string{"b", "c", "d", "b"} {
		out, _, err := prg.Eval(map[string]any{"completion": "aabcd", "answer": p})
		if err != nil || out.Value() != "aa"+p {
			t.Fatalf("eval %d: %v, %v", i, out, err)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		prg.Eval(map[string]any{"completion": "aabcd", "answer": "b"})
	})
	// A compilation allocates dozens of objects; the evaluation itself a
	// handful.
	if allocs > 20 {
		t.Errorf("%v allocations per evaluation: is the pattern compiled per call?", allocs)
	}
}

// TestNumEqualCall: num_equal(a, b, tol) as planned by numEqualCall gives
// what the interpreter's own call gives, for every kind of argument.
func TestNumEqualCall(t *testing.T) {
	build := func(planned bool) cel.Program {
		env, err := cel.NewEnv(cel.Lib(&lib{cacheMax: DefaultRegexCache, planned: planned}),
			cel.Variable("a", cel.DynType), cel.Variable("b", cel.DynType), cel.Variable("t", cel.DynType))
		if err != nil {
			t.Fatal(err)
		}
		ast, iss := env.Compile(`num_equal(a, b, t)`)
		if iss.Err() != nil {
			t.Fatal(iss.Err())
		}
		prg, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize))
		if err != nil {
			t.Fatal(err)
		}
		return prg
	}
	fast, planned := build(false), build(true)
	values := []any{types.String("1,234"), types.String("1234.0"), types.String("abc"), types.String(""),
		types.Double(1234), types.Double(math.NaN()), types.Double(math.Inf(1)), types.Int(1234), types.Uint(1234),
		types.Bool(true), types.NullValue, []any{1, 2}, map[string]any{"x": 1},
		types.NewErr("boom"), types.NewUnknown(7, nil)}
	tols := []any{types.Double(1e-6), types.Double(0), types.Double(-1), types.Int(1), types.String("x"), types.NullValue, types.NewErr("bad tol")}
	n := 0
	for _, a := range values {
		for _, b := range values {
			for _, tol := range tols {
				in := map[string]any{"a": a, "b": b, "t": tol}
				got, _, gerr := fast.Eval(in)
				want, _, werr := planned.Eval(in)
				if fmt.Sprint(got, gerr) != fmt.Sprint(want, werr) {
					t.Errorf("num_equal(%v, %v, %v) = %v, %v; planned: %v, %v", a, b, tol, got, gerr, want, werr)
				}
				n++
			}
		}
	}
	if n == 0 {
		t.Fatal("no cases")
	}
}
