package rewards

import (
	"math"
	"strings"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
)

// A native plan evaluates a component with Go closures instead of the CEL
// interpreter, for the idioms reward specs are made of: a library call on
// row variables, a comparison, a condition, arithmetic on numbers.
// Evaluating one row through the interpreter costs more than the library
// functions it calls (attribute resolution, boxing every value into a
// ref.Val, argument slices, runtime overload checks); a closure per
// expression node costs a function call.
//
// It recognises, by the overloads the type checker chose:
//
//   - literals (string, int, double, bool) and the row variables that are
//     strings or ints (completion, answer, num_tokens, …);
//   - c ? a : b, a || b, a && b, !a;
//   - ==, != on two values of one type (string, int, double, bool); <, <=,
//     >, >= on two ints, two doubles or two strings;
//   - +, -, * on ints (checked for overflow, as CEL does), +, -, *, / and
//     unary - on doubles, double(int);
//   - s.contains(t), s.startsWith(t), s.endsWith(t);
//   - extract_answer, extract_boxed, last_number, is_number, num_equal
//     with arguments that are strings, ints or doubles.
//
// Any other expression has no native plan and is evaluated by CEL. A plan
// gives ok = false wherever CEL could give something other than a plain
// value (an int overflow, NaN in an ordering, a missing prompt, a non
// finite result): the row's component is then evaluated by CEL, which
// gives its value or its error. So a plan never changes a result; it
// only skips the interpreter when it knows the answer, and
// TestNativeAgrees checks that bit for bit.
type nativeFn func(a *activation) (float64, bool)

type (
	textFn func(a *activation) (string, bool)
	dblFn  func(a *activation) (float64, bool)
	intFn  func(a *activation) (int64, bool)
	boolFn func(a *activation) (bool, bool)
)

// planNative returns a native plan for a checked expression, or nil.
func planNative(ast *celast.AST) nativeFn {
	n := nativePlanner{ast}
	e := ast.Expr()
	switch t := ast.GetType(e.ID()); {
	case t.IsExactType(types.DoubleType):
		if f := n.dbl(e); f != nil {
			return func(a *activation) (float64, bool) {
				v, ok := f(a)
				return v, ok && !math.IsNaN(v) && !math.IsInf(v, 0)
			}
		}
	case t.IsExactType(types.IntType):
		if f := n.int(e); f != nil {
			return func(a *activation) (float64, bool) {
				v, ok := f(a)
				return float64(v), ok
			}
		}
	case t.IsExactType(types.BoolType):
		if f := n.bool(e); f != nil {
			return func(a *activation) (float64, bool) {
				v, ok := f(a)
				if v {
					return 1, ok
				}
				return 0, ok
			}
		}
	}
	return nil
}

type nativePlanner struct{ ast *celast.AST }

// call returns e's function, its receiver-first arguments and the one
// overload the checker chose ("" when it left several).
func (n nativePlanner) call(e celast.Expr) (fn string, args []celast.Expr, overload string) {
	c := e.AsCall()
	args = c.Args()
	if c.IsMemberFunction() {
		args = append([]celast.Expr{c.Target()}, args...)
	}
	if ids := n.ast.GetOverloadIDs(e.ID()); len(ids) == 1 {
		overload = ids[0]
	}
	return c.FunctionName(), args, overload
}

func (n nativePlanner) is(e celast.Expr, t *types.Type) bool {
	return n.ast.GetType(e.ID()).IsExactType(t)
}

func (n nativePlanner) str(e celast.Expr) textFn {
	switch e.Kind() {
	case celast.LiteralKind:
		if s, ok := e.AsLiteral().(types.String); ok {
			return literal(string(s))
		}
	case celast.IdentKind:
		k := varIndex(e.AsIdent())
		if k >= 0 && variables[k].typ.IsExactType(types.StringType) {
			return func(a *activation) (string, bool) { return a.src.strVar(k, a.row) }
		}
	case celast.CallKind:
		fn, args, ov := n.call(e)
		if fn == operators.Conditional {
			return cond(n.bool(args[0]), n.str(args[1]), n.str(args[2]))
		}
		var f func(string) string
		switch ov {
		case "extract_answer_string":
			f = ExtractAnswer
			if k := n.textVar(args[0]); k >= 0 {
				return marked(k, extractAnswer)
			}
		case "extract_boxed_string":
			f = ExtractBoxed
			if k := n.textVar(args[0]); k >= 0 {
				return marked(k, func(s string, m *textMarks) string {
					b, _ := extractBoxed(s, m)
					return b
				})
			}
		case "last_number_string":
			f = LastNumber
		default:
			return nil
		}
		return unary(n.str(args[0]), func(s string) (string, bool) { return f(s), true })
	}
	return nil
}

// textVar returns the index of the string variable e names, or -1 when e
// is something else.
func (n nativePlanner) textVar(e celast.Expr) int {
	if e.Kind() != celast.IdentKind {
		return -1
	}
	k := varIndex(e.AsIdent())
	if k < 0 || !variables[k].typ.IsExactType(types.StringType) {
		return -1
	}
	return k
}

// marked plans f on the row's value of string variable k with its
// markers, which the row's other searches of it share.
func marked[R any](k int, f func(string, *textMarks) R) func(*activation) (R, bool) {
	return func(a *activation) (R, bool) {
		s, ok := a.src.strVar(k, a.row)
		if !ok {
			var zero R
			return zero, false
		}
		return f(s, a.marksOf(k, s)), true
	}
}

func (n nativePlanner) int(e celast.Expr) intFn {
	switch e.Kind() {
	case celast.LiteralKind:
		if i, ok := e.AsLiteral().(types.Int); ok {
			return literal(int64(i))
		}
	case celast.IdentKind:
		k := varIndex(e.AsIdent())
		if k >= 0 && variables[k].typ.IsExactType(types.IntType) {
			return func(a *activation) (int64, bool) { return a.src.intVar(k, a.row) }
		}
	case celast.CallKind:
		fn, args, ov := n.call(e)
		if fn == operators.Conditional {
			return cond(n.bool(args[0]), n.int(args[1]), n.int(args[2]))
		}
		switch ov {
		case overloads.NegateInt64:
			return unary(n.int(args[0]), func(v int64) (int64, bool) { return -v, v != math.MinInt64 })
		case overloads.AddInt64:
			return binary(n.int(args[0]), n.int(args[1]), func(x, y int64) (int64, bool) {
				return x + y, !(y > 0 && x > math.MaxInt64-y || y < 0 && x < math.MinInt64-y)
			})
		case overloads.SubtractInt64:
			return binary(n.int(args[0]), n.int(args[1]), func(x, y int64) (int64, bool) {
				return x - y, !(y < 0 && x > math.MaxInt64+y || y > 0 && x < math.MinInt64+y)
			})
		case overloads.MultiplyInt64:
			return binary(n.int(args[0]), n.int(args[1]), func(x, y int64) (int64, bool) {
				// Exact when dividing back gives x (and not -1 × MinInt64).
				r := x * y
				return r, x == 0 || (r/x == y && !(x == -1 && y == math.MinInt64))
			})
		}
	}
	return nil
}

func (n nativePlanner) dbl(e celast.Expr) dblFn {
	switch e.Kind() {
	case celast.LiteralKind:
		if d, ok := e.AsLiteral().(types.Double); ok {
			return literal(float64(d))
		}
	case celast.CallKind:
		fn, args, ov := n.call(e)
		if fn == operators.Conditional {
			return cond(n.bool(args[0]), n.dbl(args[1]), n.dbl(args[2]))
		}
		switch ov {
		case overloads.IntToDouble:
			return unary(n.int(args[0]), func(v int64) (float64, bool) { return float64(v), true })
		case overloads.NegateDouble:
			return unary(n.dbl(args[0]), func(v float64) (float64, bool) { return -v, true })
		// Each result is converted explicitly, which forbids the compiler
		// to fuse a multiplication and an addition: CEL rounds each.
		case overloads.AddDouble:
			return binary(n.dbl(args[0]), n.dbl(args[1]), func(x, y float64) (float64, bool) { return float64(x + y), true })
		case overloads.SubtractDouble:
			return binary(n.dbl(args[0]), n.dbl(args[1]), func(x, y float64) (float64, bool) { return float64(x - y), true })
		case overloads.MultiplyDouble:
			return binary(n.dbl(args[0]), n.dbl(args[1]), func(x, y float64) (float64, bool) { return float64(x * y), true })
		case overloads.DivideDouble:
			return binary(n.dbl(args[0]), n.dbl(args[1]), func(x, y float64) (float64, bool) { return float64(x / y), true })
		}
	}
	return nil
}

func (n nativePlanner) bool(e celast.Expr) boolFn {
	switch e.Kind() {
	case celast.LiteralKind:
		if b, ok := e.AsLiteral().(types.Bool); ok {
			return literal(bool(b))
		}
	case celast.CallKind:
		fn, args, ov := n.call(e)
		switch fn {
		case operators.Conditional:
			return cond(n.bool(args[0]), n.bool(args[1]), n.bool(args[2]))
		case operators.LogicalOr, operators.LogicalAnd:
			x, y := n.bool(args[0]), n.bool(args[1])
			if x == nil || y == nil {
				return nil
			}
			// The left value decides when it can: true for ||, false for &&.
			decides := fn == operators.LogicalOr
			return func(a *activation) (bool, bool) {
				v, ok := x(a)
				if !ok || v == decides {
					return v, ok
				}
				return y(a)
			}
		case operators.LogicalNot:
			return unary(n.bool(args[0]), func(v bool) (bool, bool) { return !v, true })
		case operators.Equals, operators.NotEquals:
			return n.equals(args[0], args[1], fn == operators.NotEquals)
		case operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals:
			return n.order(fn, args[0], args[1])
		}
		switch ov {
		case overloads.ContainsString:
			if k, lit := n.textVar(args[0]), args[1]; k >= 0 && lit.Kind() == celast.LiteralKind {
				if t, ok := lit.AsLiteral().(types.String); ok {
					sub := string(t)
					return marked(k, func(s string, m *textMarks) bool { return m.contains(s, sub) })
				}
			}
			return binary(n.str(args[0]), n.str(args[1]), func(s, t string) (bool, bool) { return strings.Contains(s, t), true })
		case overloads.StartsWithString:
			return binary(n.str(args[0]), n.str(args[1]), func(s, t string) (bool, bool) { return strings.HasPrefix(s, t), true })
		case overloads.EndsWithString:
			return binary(n.str(args[0]), n.str(args[1]), func(s, t string) (bool, bool) { return strings.HasSuffix(s, t), true })
		case "is_number_string":
			return unary(n.str(args[0]), func(s string) (bool, bool) {
				_, num := ParseNumber(s)
				return num, true
			})
		case "num_equal_dyn_dyn":
			return n.numEqual(args[0], args[1], func(*activation) (float64, bool) { return DefaultTolerance, true })
		case numEqualTolID:
			if !n.is(args[2], types.DoubleType) {
				return nil
			}
			return n.numEqual(args[0], args[1], n.dbl(args[2]))
		}
	}
	return nil
}

// numEqual plans num_equal(x, y, tol) for arguments that are strings,
// ints or doubles. Every argument is evaluated, as CEL does before a call.
func (n nativePlanner) numEqual(x, y celast.Expr, tol dblFn) boolFn {
	nx, ny := n.number(x), n.number(y)
	if nx == nil || ny == nil || tol == nil {
		return nil
	}
	return func(a *activation) (bool, bool) {
		xv, xnum, ok1 := nx(a)
		yv, ynum, ok2 := ny(a)
		t, ok3 := tol(a)
		return xnum && ynum && numClose(xv, yv, t), ok1 && ok2 && ok3
	}
}

// number plans an argument of num_equal: what numOf reads it as.
func (n nativePlanner) number(e celast.Expr) func(a *activation) (v float64, num, ok bool) {
	switch {
	case n.is(e, types.StringType):
		if f := n.str(e); f != nil {
			return func(a *activation) (float64, bool, bool) {
				s, ok := f(a)
				v, num := ParseNumber(s)
				return v, num, ok
			}
		}
	case n.is(e, types.DoubleType):
		if f := n.dbl(e); f != nil {
			return func(a *activation) (float64, bool, bool) {
				v, ok := f(a)
				return v, !math.IsNaN(v) && !math.IsInf(v, 0), ok
			}
		}
	case n.is(e, types.IntType):
		if f := n.int(e); f != nil {
			return func(a *activation) (float64, bool, bool) {
				v, ok := f(a)
				return float64(v), true, ok
			}
		}
	}
	return nil
}

// equals plans x == y (or x != y) for two values of one simple type.
func (n nativePlanner) equals(x, y celast.Expr, not bool) boolFn {
	eq := func(b, ok bool) (bool, bool) { return b != not, ok }
	switch {
	case n.is(x, types.StringType) && n.is(y, types.StringType):
		return binary(n.str(x), n.str(y), func(s, t string) (bool, bool) { return eq(s == t, true) })
	case n.is(x, types.IntType) && n.is(y, types.IntType):
		return binary(n.int(x), n.int(y), func(s, t int64) (bool, bool) { return eq(s == t, true) })
	case n.is(x, types.DoubleType) && n.is(y, types.DoubleType):
		return binary(n.dbl(x), n.dbl(y), func(s, t float64) (bool, bool) { return eq(s == t, true) })
	case n.is(x, types.BoolType) && n.is(y, types.BoolType):
		return binary(n.bool(x), n.bool(y), func(s, t bool) (bool, bool) { return eq(s == t, true) })
	}
	return nil
}

// order plans <, <=, > and >= on two ints, two doubles or two strings.
// An ordering with NaN is left to CEL.
func (n nativePlanner) order(fn string, x, y celast.Expr) boolFn {
	switch {
	case n.is(x, types.IntType) && n.is(y, types.IntType):
		return binary(n.int(x), n.int(y), func(s, t int64) (bool, bool) { return compare(fn, s, t), true })
	case n.is(x, types.DoubleType) && n.is(y, types.DoubleType):
		return binary(n.dbl(x), n.dbl(y), func(s, t float64) (bool, bool) {
			return compare(fn, s, t), !math.IsNaN(s) && !math.IsNaN(t)
		})
	case n.is(x, types.StringType) && n.is(y, types.StringType):
		return binary(n.str(x), n.str(y), func(s, t string) (bool, bool) { return compare(fn, s, t), true })
	}
	return nil
}

func compare[T int64 | float64 | string](fn string, x, y T) bool {
	switch fn {
	case operators.Less:
		return x < y
	case operators.LessEquals:
		return x <= y
	case operators.Greater:
		return x > y
	}
	return x >= y
}

// cond plans c ? x : y.
func cond[T any](c boolFn, x, y func(*activation) (T, bool)) func(*activation) (T, bool) {
	if c == nil || x == nil || y == nil {
		return nil
	}
	return func(a *activation) (T, bool) {
		v, ok := c(a)
		if !ok {
			var zero T
			return zero, false
		}
		if v {
			return x(a)
		}
		return y(a)
	}
}

// literal plans a constant.
func literal[T any](v T) func(*activation) (T, bool) {
	return func(*activation) (T, bool) { return v, true }
}

// unary plans op(x).
func unary[X, R any](x func(*activation) (X, bool), op func(X) (R, bool)) func(*activation) (R, bool) {
	if x == nil {
		return nil
	}
	return func(a *activation) (R, bool) {
		xv, ok1 := x(a)
		r, ok := op(xv)
		return r, ok && ok1
	}
}

// binary plans op(x, y), both evaluated first.
func binary[X, R any](x, y func(*activation) (X, bool), op func(X, X) (R, bool)) func(*activation) (R, bool) {
	if x == nil || y == nil {
		return nil
	}
	return func(a *activation) (R, bool) {
		xv, ok1 := x(a)
		yv, ok2 := y(a)
		r, ok := op(xv, yv)
		return r, ok && ok1 && ok2
	}
}
