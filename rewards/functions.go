package rewards

import (
	"context"
	"fmt"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// FunctionResult is a batch function's verdict on one row: a value, or
// why the row has none.
type FunctionResult struct {
	Value float64
	// Status is StatusOK, StatusError (not scored) or StatusNonfinite.
	Status string
	// Reason says why a row has no value.
	Reason string
}

// BatchFunc scores rows in one call: a spec's Python function
// (functions:), run by rewards/python. It returns one result per row, in
// order. memo is the scoring call's Memoizer, nil when it has none. The
// error is only for no verdict at all (ctx ended, the worker cannot
// start): a row that is not scored is a result with its status.
type BatchFunc func(ctx context.Context, rows []Row, memo Memoizer) ([]FunctionResult, error)

// WithFunction gives the function that runs the spec's Python function
// name (rewards/runners gives the spec's own).
func WithFunction(name string, f BatchFunc) Option {
	return func(c *compileConfig) { c.functions[name] = f }
}

// readsWholeRows reports whether scoring hands whole rows to code of the
// spec (verifiers, judges, functions), which then reads every column.
func (p *Program) readsWholeRows() bool {
	return len(p.verifiers)+len(p.judges)+len(p.functions) > 0
}

// callFunctions calls each of the program's functions once on rows, and
// returns each row's functions variable and its fault: the first
// function that gave the row no finite value. A row without a value
// never reaches an expression, so functions.NAME is always a double there.
func (p *Program) callFunctions(ctx context.Context, rows []Row, memo Memoizer) ([]ref.Val, []fault, error) {
	vals := make([]map[ref.Val]ref.Val, len(rows))
	faults := make([]fault, len(rows))
	for i := range vals {
		vals[i] = make(map[ref.Val]ref.Val, len(p.functions))
	}
	for _, f := range p.functions {
		res, err := f.fn(ctx, rows, memo)
		if err != nil {
			return nil, nil, fmt.Errorf("python function %s: %w", f.name, err)
		}
		if len(res) != len(rows) {
			return nil, nil, fmt.Errorf("python function %s: %d results for %d rows", f.name, len(res), len(rows))
		}
		for i, r := range res {
			if faults[i].msg != "" {
				continue
			}
			switch {
			case r.Status == StatusOK && tables.Finite(r.Value):
				vals[i][types.String(f.name)] = types.Double(r.Value)
			case r.Status == StatusOK:
				faults[i] = nonfinite("function "+f.name, r.Value)
			case r.Status == StatusNonfinite:
				faults[i] = fault{StatusNonfinite, r.Reason}
			default:
				faults[i] = failed(r.Reason)
			}
		}
	}
	out := make([]ref.Val, len(rows))
	for i, m := range vals {
		out[i] = types.NewRefValMap(types.DefaultTypeAdapter, m)
	}
	return out, faults, nil
}
