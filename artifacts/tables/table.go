package tables

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Metadata keys written into both the Arrow schema metadata and the Parquet
// file key-value metadata of every file rlpipe writes.
const (
	// MetaTable holds the table name, e.g. "trajectories".
	MetaTable = "rlpipe.table"
	// MetaSchemaVersion holds the table's schema version as a decimal integer.
	MetaSchemaVersion = "rlpipe.schema_version"
)

// Definition is the untyped view of a table, for code that handles tables
// by name (the CLI's import, cat and export). *Table[T] implements it.
type Definition interface {
	// Name is the table name stored under MetaTable.
	Name() string
	// Version is the schema version stored under MetaSchemaVersion.
	Version() int
	// Schema is the canonical Arrow schema, with the two metadata keys.
	Schema() *arrow.Schema
	// Columns describes each column in schema order.
	Columns() []Column
	// withExtra returns the definition extended by the dynamic columns found
	// in a file or an input header (the rewards components); tables without
	// dynamic columns return themselves.
	withExtra(names []string) (Definition, error)
	// extraName reports whether a column name is a dynamic column of this
	// table and the component name it carries.
	extraName(column string) (string, bool)
}

// Column describes one column of a table.
type Column struct {
	Name     string
	Type     arrow.DataType
	Nullable bool
	Doc      string
	// Since is the schema version that added the column (1: the first).
	Since int
	// FieldsSince maps the path of a nested field added after the column
	// (e.g. "turns.element.status") to the schema version that added it.
	// A file of an older version may lack the field: it reads as null.
	FieldsSince map[string]int
	// Unique: no two rows of a table hold the same value (a prompts
	// table's prompt_id); Import refuses a file that repeats one.
	Unique bool
}

// Table is a typed table: a name, a schema version, the Arrow schema and
// the mapping between Arrow columns and the Go row type T. The package
// declares one per table (Prompts, Trajectories, Rewards, Advantages,
// EvalSamples, EvalSummary); they are immutable and safe to share.
type Table[T any] struct {
	name    string
	version int
	cols    []column[T]
	schema  *arrow.Schema
	// check validates a row before it is written (nil: no check).
	check func(r *T) error
	// dyn describes per-file dynamic columns (rewards components); nil for
	// tables with a fixed column set.
	dyn *dynamic[T]
	// extra is key-value metadata written beside MetaTable and
	// MetaSchemaVersion (WithMetadata), in order.
	extra [][2]string
}

// column binds one Arrow column to a field of T.
type column[T any] struct {
	field arrow.Field
	doc   string
	// plain marks mostly unique values (completions, prompts, token ids,
	// logprobs, a rewards file's prompt ids): Parquet dictionary
	// encoding is turned off for them, as it would only cost time.
	plain bool
	// unique: no two rows share a value (Column.Unique).
	unique bool
	// enc binds a builder of the column's type and returns a function that
	// appends the column's value of a row.
	enc func(b array.Builder) func(r *T)
	// dec binds an array of the column's canonical type and returns a
	// function that stores the value at index i into a row.
	dec func(a arrow.Array) func(i int, r *T)
	// since is the schema version that added the column (0: the first).
	// A file of an older version, or without a version, may lack it: the
	// column then reads as null (since is only for nullable columns).
	since int
	// fieldsSince is Column.FieldsSince.
	fieldsSince map[string]int
}

// since marks a nullable column as added in schema version v.
func since[T any](v int, c column[T]) column[T] {
	if !c.field.Nullable {
		panic("tables: a column added in a later version must be nullable: " + c.field.Name)
	}
	c.since = v
	return c
}

// sinceFields marks nested fields of a column as added in schema version
// v. Each path is relative to the column ("element.status" for a field of
// a list of structs) and must name a nullable field.
func sinceFields[T any](v int, c column[T], paths ...string) column[T] {
	m := make(map[string]int, len(c.fieldsSince)+len(paths))
	for k, x := range c.fieldsSince {
		m[k] = x
	}
	for _, p := range paths {
		if f, ok := nestedField(c.field.Type, strings.Split(p, ".")); !ok || !f.Nullable {
			panic("tables: a nested field added in a later version must exist and be nullable: " + c.field.Name + "." + p)
		}
		m[c.field.Name+"."+p] = v
	}
	c.fieldsSince = m
	return c
}

// nestedField finds the field at path inside t ("element" steps into a
// list, a name into a struct).
func nestedField(t arrow.DataType, path []string) (arrow.Field, bool) {
	var f arrow.Field
	for _, step := range path {
		switch tt := t.(type) {
		case *arrow.ListType:
			if step != "element" {
				return f, false
			}
			f = tt.ElemField()
		case *arrow.StructType:
			var ok bool
			if f, ok = tt.FieldByName(step); !ok {
				return f, false
			}
		default:
			return f, false
		}
		t = f.Type
	}
	return f, len(path) > 0
}

// dynamic describes columns whose names are chosen per file: the rewards
// table's r_<component> columns.
type dynamic[T any] struct {
	prefix string
	// at is the position, in the fixed columns, before which dynamic
	// columns are placed.
	at int
	// names are the dynamic names (without prefix) in column order; set
	// holds the same names for lookups.
	names []string
	set   map[string]bool
	// col builds the column for one name.
	col func(name string) column[T]
	// collect lists the names the rows use, sorted.
	collect func(rows []T) []string
	// check validates a row against the names in the schema.
	check func(names map[string]bool, r *T) error
}

func newTable[T any](name string, version int, cols []column[T]) *Table[T] {
	t := &Table[T]{name: name, version: version, cols: cols}
	t.schema = buildSchema(name, version, cols, nil)
	return t
}

func buildSchema[T any](name string, version int, cols []column[T], extra [][2]string) *arrow.Schema {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = c.field
	}
	keys, vals := []string{MetaTable, MetaSchemaVersion}, []string{name, strconv.Itoa(version)}
	for _, kv := range extra {
		keys, vals = append(keys, kv[0]), append(vals, kv[1])
	}
	md := arrow.NewMetadata(keys, vals)
	return arrow.NewSchema(fields, &md)
}

// WithMetadata returns a copy of t whose files also record key = value
// in their key-value metadata (File.Metadata reads it back), e.g. a
// rewards table's MetaCorrect. A key set before is replaced.
func (t *Table[T]) WithMetadata(key, value string) *Table[T] {
	nt := *t
	nt.extra = nil
	for _, kv := range t.extra {
		if kv[0] != key {
			nt.extra = append(nt.extra, kv)
		}
	}
	nt.extra = append(nt.extra, [2]string{key, value})
	nt.schema = buildSchema(t.name, t.version, t.cols, nt.extra)
	return &nt
}

// Name returns the table name (the value of MetaTable).
func (t *Table[T]) Name() string { return t.name }

// Version returns the schema version (the value of MetaSchemaVersion).
func (t *Table[T]) Version() int { return t.version }

// Schema returns the canonical Arrow schema. Files this package writes
// have exactly these fields, in this order.
func (t *Table[T]) Schema() *arrow.Schema { return t.schema }

// Columns describes each column in schema order.
func (t *Table[T]) Columns() []Column {
	out := make([]Column, len(t.cols))
	for i, c := range t.cols {
		out[i] = Column{Name: c.field.Name, Type: c.field.Type, Nullable: c.field.Nullable, Doc: c.doc, Since: max(c.since, 1), FieldsSince: c.fieldsSince, Unique: c.unique}
	}
	return out
}

// Dynamic returns the names of the table's dynamic columns without their
// prefix (the reward components of a rewards table), or nil.
func (t *Table[T]) Dynamic() []string {
	if t.dyn == nil {
		return nil
	}
	return append([]string(nil), t.dyn.names...)
}

func (t *Table[T]) withExtra(names []string) (Definition, error) { return t.extend(names) }

func (t *Table[T]) extraName(column string) (string, bool) {
	if t.dyn == nil || len(column) <= len(t.dyn.prefix) || column[:len(t.dyn.prefix)] != t.dyn.prefix {
		return "", false
	}
	return column[len(t.dyn.prefix):], true
}

// extend returns a copy of t whose dynamic columns are names (replacing any
// it had). Tables without dynamic columns accept only an empty list.
func (t *Table[T]) extend(names []string) (*Table[T], error) {
	if len(names) == 0 && (t.dyn == nil || len(t.dyn.names) == 0) {
		return t, nil
	}
	if t.dyn == nil {
		return nil, fmt.Errorf("table %s has no dynamic columns: %w", t.name, ErrSchemaMismatch)
	}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if err := validComponent(n); err != nil {
			return nil, fmt.Errorf("table %s: %w", t.name, err)
		}
		if seen[n] {
			return nil, fmt.Errorf("table %s: component %q listed twice: %w", t.name, n, errInvalid)
		}
		seen[n] = true
	}
	base := t.fixed()
	cols := make([]column[T], 0, len(base)+len(names))
	cols = append(cols, base[:t.dyn.at]...)
	for _, n := range names {
		cols = append(cols, t.dyn.col(n))
	}
	cols = append(cols, base[t.dyn.at:]...)
	dyn := *t.dyn
	dyn.names = append([]string(nil), names...)
	dyn.set = seen
	nt := &Table[T]{name: t.name, version: t.version, cols: cols, dyn: &dyn, extra: t.extra}
	nt.schema = buildSchema(t.name, t.version, cols, t.extra)
	nt.check = t.check
	return nt, nil
}

// fixed returns the columns that are not dynamic.
func (t *Table[T]) fixed() []column[T] {
	if t.dyn == nil || len(t.dyn.names) == 0 {
		return t.cols
	}
	out := make([]column[T], 0, len(t.cols)-len(t.dyn.names))
	out = append(out, t.cols[:t.dyn.at]...)
	out = append(out, t.cols[t.dyn.at+len(t.dyn.names):]...)
	return out
}

// validate checks a row before writing.
func (t *Table[T]) validate(r *T) error {
	if t.check != nil {
		if err := t.check(r); err != nil {
			return err
		}
	}
	if t.dyn != nil {
		return t.dyn.check(t.dyn.set, r)
	}
	return nil
}

// All returns the definitions of every known table, in a fixed order.
func All() []Definition {
	return []Definition{Prompts, Trajectories, Rewards, Advantages, TokenValues, EvalSamples, EvalSummary}
}

// Lookup returns the definition of the table with that name.
func Lookup(name string) (Definition, bool) {
	for _, d := range All() {
		if d.Name() == name {
			return d, true
		}
	}
	return nil, false
}
