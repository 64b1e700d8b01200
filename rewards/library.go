package rewards

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// DefaultTolerance is the tolerance of num_equal(a, b) without a third
// argument.
const DefaultTolerance = 1e-9

// DefaultRegexCache is how many distinct non-constant regex patterns the
// library keeps compiled (see RegexCache).
const DefaultRegexCache = 256

// LibOption configures the function library.
type LibOption func(*lib)

// RegexCache sets how many compiled patterns the library keeps for
// regex_find and regex_extract calls whose pattern is not a constant
// (default DefaultRegexCache). Constant patterns are compiled once, when
// the program is built, and are not counted.
func RegexCache(n int) LibOption { return func(l *lib) { l.cacheMax = int64(n) } }

// Library returns the reward function library as a CEL environment
// option: extract_answer, extract_boxed, last_number, parse_number,
// is_number, num_equal, regex_find, regex_extract, json_get, count and
// repetition_ratio. docs/REWARDS.md describes each. Compile adds it; add
// it yourself only to use the functions in a CEL environment of your own.
func Library(opts ...LibOption) cel.EnvOption {
	l := &lib{cacheMax: DefaultRegexCache}
	for _, o := range opts {
		o(l)
	}
	return cel.Lib(l)
}

type lib struct {
	// planned leaves num_equal as the interpreter plans it (for tests).
	planned  bool
	cacheMax int64
	cacheLen atomic.Int64
	cache    sync.Map // pattern → *regexp.Regexp or error
}

func (l *lib) LibraryName() string { return "rlpipe.rewards" }

func str(v ref.Val) (string, bool) {
	s, ok := v.(types.String)
	return string(s), ok
}

func strFn(f func(string) string) cel.OverloadOpt {
	return cel.UnaryBinding(func(v ref.Val) ref.Val {
		s, ok := str(v)
		if !ok {
			return types.MaybeNoSuchOverloadErr(v)
		}
		return types.String(f(s))
	})
}

func (l *lib) CompileOptions() []cel.EnvOption {
	S, D, I, B, Dyn := cel.StringType, cel.DoubleType, cel.IntType, cel.BoolType, cel.DynType
	return []cel.EnvOption{
		cel.Function("extract_answer",
			cel.FunctionDocs(`final answer of a completion: last \boxed{…}, else text after "####", else the last number, else ""`),
			cel.Overload("extract_answer_string", []*cel.Type{S}, S, strFn(ExtractAnswer))),
		cel.Function("extract_boxed",
			cel.FunctionDocs(`content of the last \boxed{…} with balanced braces, or ""`),
			cel.Overload("extract_boxed_string", []*cel.Type{S}, S, strFn(ExtractBoxed))),
		cel.Function("last_number",
			cel.FunctionDocs(`last number written in the text, as written ("-1,234.5"), or ""`),
			cel.Overload("last_number_string", []*cel.Type{S}, S, strFn(LastNumber))),
		cel.Function("parse_number",
			cel.FunctionDocs(`the number a text holds ("$1,234.50", "12 km", "\frac{1}{2}"); an error when there is none: guard with is_number`),
			cel.Overload("parse_number_string", []*cel.Type{S}, D, cel.UnaryBinding(func(v ref.Val) ref.Val {
				s, ok := str(v)
				if !ok {
					return types.MaybeNoSuchOverloadErr(v)
				}
				f, ok := ParseNumber(s)
				if !ok {
					return types.NewErr("parse_number: %q is not a number", clip(s, 40))
				}
				return types.Double(f)
			}))),
		cel.Function("is_number",
			cel.FunctionDocs(`whether parse_number accepts the text`),
			cel.Overload("is_number_string", []*cel.Type{S}, B, cel.UnaryBinding(func(v ref.Val) ref.Val {
				s, ok := str(v)
				if !ok {
					return types.MaybeNoSuchOverloadErr(v)
				}
				_, ok = ParseNumber(s)
				return types.Bool(ok)
			}))),
		cel.Function("num_equal",
			cel.FunctionDocs(`whether two values (strings or numbers) are numbers within tol of each other; false when either is not a number`),
			cel.Overload("num_equal_dyn_dyn", []*cel.Type{Dyn, Dyn}, B, cel.BinaryBinding(func(a, b ref.Val) ref.Val {
				return numEqual(a, b, DefaultTolerance)
			})),
			cel.Overload(numEqualTolID, []*cel.Type{Dyn, Dyn, D}, B, cel.FunctionBinding(func(args ...ref.Val) ref.Val {
				tol, ok := args[2].(types.Double)
				if !ok {
					return types.MaybeNoSuchOverloadErr(args[2])
				}
				return numEqual(args[0], args[1], float64(tol))
			}))),
		cel.Function("count",
			cel.FunctionDocs(`non-overlapping occurrences of sub in s`),
			cel.Overload("count_string_string", []*cel.Type{S, S}, I, cel.BinaryBinding(func(a, b ref.Val) ref.Val {
				s, ok1 := str(a)
				sub, ok2 := str(b)
				if !ok1 || !ok2 {
					return types.NoSuchOverloadErr()
				}
				return types.Int(Count(s, sub))
			}))),
		cel.Function("repetition_ratio",
			cel.FunctionDocs(`fraction of word n-grams that repeat an earlier one (n = 4 unless given)`),
			cel.Overload("repetition_ratio_string", []*cel.Type{S}, D, cel.UnaryBinding(func(v ref.Val) ref.Val {
				s, ok := str(v)
				if !ok {
					return types.MaybeNoSuchOverloadErr(v)
				}
				return types.Double(RepetitionRatio(s, DefaultNGram))
			})),
			cel.Overload("repetition_ratio_string_int", []*cel.Type{S, I}, D, cel.BinaryBinding(func(a, b ref.Val) ref.Val {
				s, ok1 := str(a)
				n, ok2 := b.(types.Int)
				if !ok1 || !ok2 {
					return types.NoSuchOverloadErr()
				}
				if n < 1 || n > 64 {
					return types.NewErr("repetition_ratio: n = %d, want 1 to 64", int64(n))
				}
				return types.Double(RepetitionRatio(s, int(n)))
			}))),
		cel.Function("json_get",
			cel.FunctionDocs(`value at a dotted path ("a.b.0") in a JSON text; null when the text is not JSON or the path is missing`),
			cel.Overload("json_get_string_string", []*cel.Type{S, S}, Dyn, cel.BinaryBinding(func(a, b ref.Val) ref.Val {
				s, ok1 := str(a)
				p, ok2 := str(b)
				if !ok1 || !ok2 {
					return types.NoSuchOverloadErr()
				}
				return jsonGet(s, p)
			}))),
		cel.Function("regex_find",
			cel.FunctionDocs(`leftmost match of an RE2 pattern in s, or ""`),
			cel.Overload(regexFindID, []*cel.Type{S, S}, S, cel.BinaryBinding(func(a, b ref.Val) ref.Val {
				s, ok1 := str(a)
				p, ok2 := str(b)
				if !ok1 || !ok2 {
					return types.NoSuchOverloadErr()
				}
				re, err := l.regex(p)
				if err != nil {
					return types.WrapErr(err)
				}
				return types.String(re.FindString(s))
			}))),
		cel.Function("regex_extract",
			cel.FunctionDocs(`group g of the leftmost match of an RE2 pattern in s (0: the whole match), or "" when there is no match`),
			cel.Overload(regexExtractID, []*cel.Type{S, S, I}, S, cel.FunctionBinding(func(args ...ref.Val) ref.Val {
				s, ok1 := str(args[0])
				p, ok2 := str(args[1])
				g, ok3 := args[2].(types.Int)
				if !ok1 || !ok2 || !ok3 {
					return types.NoSuchOverloadErr()
				}
				re, err := l.regex(p)
				if err != nil {
					return types.WrapErr(err)
				}
				return regexExtract(re, s, g)
			}))),
	}
}

const (
	regexFindID    = "regex_find_string_string"
	regexExtractID = "regex_extract_string_string_int"
	numEqualTolID  = "num_equal_dyn_dyn_double"
)

// ProgramOptions compile constant patterns once, when the program is
// built: a bad constant pattern or group is a compile error, and rows
// never pay for a compilation.
func (l *lib) ProgramOptions() []cel.ProgramOption {
	opts := []cel.ProgramOption{
		cel.OptimizeRegex(
			compiledRegex("regex_find", regexFindID, nil, func(re *regexp.Regexp, args []ref.Val) ref.Val {
				s, ok := str(args[0])
				if !ok {
					return types.NoSuchOverloadErr()
				}
				return types.String(re.FindString(s))
			}),
			compiledRegex("regex_extract", regexExtractID, func(re *regexp.Regexp, call interpreter.InterpretableCall, pattern string) error {
				if c, ok := call.Args()[2].(interpreter.InterpretableConst); ok {
					if g, ok := c.Value().(types.Int); ok && (g < 0 || int(g) > re.NumSubexp()) {
						return fmt.Errorf("regex_extract: group %d out of range: the pattern %q has %d groups", int64(g), pattern, re.NumSubexp())
					}
				}
				return nil
			}, func(re *regexp.Regexp, args []ref.Val) ref.Val {
				s, ok1 := str(args[0])
				g, ok2 := args[2].(types.Int)
				if !ok1 || !ok2 {
					return types.NoSuchOverloadErr()
				}
				return regexExtract(re, s, g)
			}),
		),
	}
	if !l.planned {
		opts = append(opts, cel.CustomDecoratorV2(decorateNumEqual))
	}
	return opts
}

// compiledRegex plans the calls of fn (overload id overload) whose
// pattern, argument 1, is a constant: the pattern is compiled once, an
// error naming fn; check (when set) vets the compiled pattern against the
// call's other arguments, and eval evaluates a row's arguments.
func compiledRegex(fn, overload string, check func(re *regexp.Regexp, call interpreter.InterpretableCall, pattern string) error,
	eval func(re *regexp.Regexp, args []ref.Val) ref.Val) *interpreter.RegexOptimization {
	return &interpreter.RegexOptimization{
		Function: fn, OverloadID: overload, RegexIndex: 1,
		Factory: func(call interpreter.InterpretableCall, pattern string) (interpreter.InterpretableCall, error) {
			re, err := regexp.Compile(pattern)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", fn, err)
			}
			if check != nil {
				if err := check(re, call, pattern); err != nil {
					return nil, err
				}
			}
			return interpreter.NewCall(call.ID(), call.Function(), call.OverloadID(), call.Args(), func(args ...ref.Val) ref.Val {
				return eval(re, args)
			}), nil
		},
	}
}

// decorateNumEqual plans num_equal(a, b, tol) as a numEqualCall.
func decorateNumEqual(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
	call, ok := i.(interpreter.InterpretableCall)
	if !ok || call.OverloadID() != numEqualTolID || len(call.Args()) != 3 {
		return i, nil
	}
	c := &numEqualCall{planned: i}
	for k, a := range call.Args() {
		v2, ok := a.(interpreter.InterpretableV2)
		if !ok {
			return i, nil
		}
		c.args[k] = v2
	}
	return c, nil
}

// numEqualCall evaluates num_equal(a, b, tol) without what the planned
// call costs on every row: a slice for the arguments and a check of
// their runtime types against the signature. When a and b are strings
// or numbers and tol a double, which that check accepts and for which
// the call cannot fail, it gives what the planned call gives; for any
// other value (an error, an unknown, null, a list…) it runs the planned
// call, which evaluates the arguments again: expressions are pure.
type numEqualCall struct {
	planned interpreter.InterpretableV2
	args    [3]interpreter.InterpretableV2
}

func (c *numEqualCall) ID() int64 { return c.planned.ID() }

func (c *numEqualCall) Eval(a interpreter.Activation) ref.Val {
	return c.Exec(interpreter.AsFrame(a))
}

func (c *numEqualCall) Exec(f *interpreter.ExecutionFrame) ref.Val {
	x := c.args[0].Exec(f)
	if !isPlainValue(x) {
		return c.planned.Exec(f)
	}
	y := c.args[1].Exec(f)
	if !isPlainValue(y) {
		return c.planned.Exec(f)
	}
	tol, ok := c.args[2].Exec(f).(types.Double)
	if !ok {
		return c.planned.Exec(f)
	}
	return numEqual(x, y, float64(tol))
}

// The planned call's methods, for decorators that look for calls.
func (c *numEqualCall) Function() string { return c.planned.(interpreter.InterpretableCall).Function() }
func (c *numEqualCall) OverloadID() string {
	return c.planned.(interpreter.InterpretableCall).OverloadID()
}
func (c *numEqualCall) Args() []interpreter.InterpretableV2 {
	return c.planned.(interpreter.InterpretableCall).Args()
}

// isPlainValue: a value num_equal reads (a string or a number), never an
// error or an unknown.
func isPlainValue(v ref.Val) bool {
	switch v.(type) {
	case types.String, types.Double, types.Int, types.Uint:
		return true
	}
	return false
}

func regexExtract(re *regexp.Regexp, s string, g types.Int) ref.Val {
	if g < 0 || int(g) > re.NumSubexp() {
		return types.NewErr("regex_extract: group %d out of range: the pattern %q has %d groups", int64(g), re.String(), re.NumSubexp())
	}
	m := re.FindStringSubmatchIndex(s)
	if m == nil || m[2*g] < 0 {
		return types.String("")
	}
	return types.String(s[m[2*g]:m[2*g+1]])
}

// regex compiles a pattern that was not a constant, keeping up to
// cacheMax compiled patterns.
func (l *lib) regex(p string) (*regexp.Regexp, error) {
	if v, ok := l.cache.Load(p); ok {
		if re, ok := v.(*regexp.Regexp); ok {
			return re, nil
		}
		return nil, v.(error)
	}
	re, err := regexp.Compile(p)
	var v any = re
	if err != nil {
		err = fmt.Errorf("regex: %w", err)
		v = err
	}
	if l.cacheLen.Add(1) <= l.cacheMax {
		l.cache.Store(p, v)
	} else {
		l.cacheLen.Add(-1)
	}
	return re, err
}

func numEqual(a, b ref.Val, tol float64) ref.Val {
	x, ok := numOf(a)
	if !ok {
		return types.False
	}
	y, ok := numOf(b)
	if !ok {
		return types.False
	}
	return types.Bool(numClose(x, y, tol))
}

// numOf reads a CEL value as a number: numbers as they are, strings with
// ParseNumber.
func numOf(v ref.Val) (float64, bool) {
	switch v := v.(type) {
	case types.Double:
		f := float64(v)
		return f, !math.IsNaN(f) && !math.IsInf(f, 0)
	case types.Int:
		return float64(v), true
	case types.Uint:
		return float64(v), true
	case types.String:
		return ParseNumber(string(v))
	}
	return 0, false
}

// jsonGet walks a dotted path through a JSON text.
func jsonGet(s, path string) ref.Val {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return types.NullValue
	}
	v, ok := walkPath(v, path)
	if !ok {
		return types.NullValue
	}
	return types.DefaultTypeAdapter.NativeToValue(v)
}

func walkPath(v any, path string) (any, bool) {
	if path == "" {
		return v, true
	}
	for seg := range strings.SplitSeq(path, ".") {
		switch c := v.(type) {
		case map[string]any:
			x, ok := c[seg]
			if !ok {
				return nil, false
			}
			v = x
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
