package tables

import (
	"fmt"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
)

// Errors. Each wraps artifacts.ErrInvalid, so callers that only care that
// input was bad test errors.Is(err, artifacts.ErrInvalid).
var (
	// ErrNotParquet: the bytes are not a readable Parquet file (another
	// format, a truncated file, a corrupt footer or page).
	ErrNotParquet = artifacts.NamedError("not a readable parquet file", artifacts.ErrInvalid)
	// ErrSchemaMismatch: the file is Parquet but does not hold the expected
	// table: it names another table, lacks a column, has a column of the
	// wrong type, or nulls in a required column. The error is a
	// *SchemaError.
	ErrSchemaMismatch = artifacts.NamedError("schema mismatch", artifacts.ErrInvalid)
	// ErrBadValue: an imported value does not fit its column; the error is a
	// *ValueError naming the line and column.
	ErrBadValue = artifacts.NamedError("bad value", artifacts.ErrInvalid)
	// ErrNoFiniteReward: a batch of rewards has nothing to train on, as no
	// sample is scored and some rewards are NaN or infinite; the error is
	// a *NonfiniteError naming the first.
	ErrNoFiniteReward = artifacts.NamedError("no sample has a finite reward", artifacts.ErrInvalid)
	// ErrNoRows: an imported file holds no rows (it is empty, holds only
	// blank lines, or a CSV header alone), or its rows hold no columns.
	// A table of nothing is refused rather than written: it is almost
	// always the wrong file.
	ErrNoRows = artifacts.NamedError("no rows", artifacts.ErrInvalid)

	errInvalid = artifacts.ErrInvalid
)

// SchemaError says which file, table and column do not match, and how.
// It matches ErrSchemaMismatch with errors.Is.
type SchemaError struct {
	File   string // name the caller gave for the file
	Table  string // table expected
	Column string // column path, e.g. "turns.element.tool_calls"; "" for the whole file
	Want   string // expected type (or table)
	Found  string // found type (or table); "" when the column is missing
	Hint   string // what to do about it
}

func (e *SchemaError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "read %s file %q: ", e.Table, e.File)
	switch {
	case e.Column == "":
		fmt.Fprintf(&b, "want %s, found %s", e.Want, e.Found)
	case e.Found == "":
		fmt.Fprintf(&b, "column %q (%s) is missing", e.Column, e.Want)
	default:
		fmt.Fprintf(&b, "column %q: want %s, found %s", e.Column, e.Want, e.Found)
	}
	if e.Hint != "" {
		b.WriteString(" (" + e.Hint + ")")
	}
	return b.String()
}

func (e *SchemaError) Unwrap() error { return ErrSchemaMismatch }

// ValueError names the input line and column of a value that does not fit.
// It matches ErrBadValue with errors.Is.
type ValueError struct {
	Input  string // input name
	Line   int64  // 1-based line (for CSV, the record's first line)
	Column string
	Want   string // expected type
	Value  string // the value, shortened
	Reason string
}

func (e *ValueError) Error() string {
	msg := fmt.Sprintf("import %s line %d column %q: ", e.Input, e.Line, e.Column)
	if e.Want != "" {
		msg += fmt.Sprintf("want %s, found %s", e.Want, e.Value)
		if e.Reason != "" {
			msg += ": "
		}
	}
	return msg + e.Reason
}

func (e *ValueError) Unwrap() error { return ErrBadValue }
