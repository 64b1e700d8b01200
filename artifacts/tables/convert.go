package tables

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Format is a text table format for import and export.
type Format string

// Text formats.
const (
	// JSONL is one JSON object per line (also called NDJSON).
	JSONL Format = "jsonl"
	// CSV is comma-separated values with a header row (RFC 4180).
	CSV Format = "csv"
)

// FormatOf returns the format a file name's extension names: .jsonl,
// .ndjson or .json for JSONL; .csv for CSV.
func FormatOf(name string) (Format, error) {
	switch strings.ToLower(path.Ext(name)) {
	case ".jsonl", ".ndjson", ".json":
		return JSONL, nil
	case ".csv":
		return CSV, nil
	}
	return "", fmt.Errorf("format of %q: want a .jsonl, .ndjson, .json or .csv name: %w", name, errInvalid)
}

// DefaultInferRows is the default number of rows read before the schema
// is fixed.
const DefaultInferRows = 1000

// ImportOptions tune Import. A nil *ImportOptions means JSONL input with
// an inferred schema.
type ImportOptions struct {
	// Format of the input (default JSONL).
	Format Format
	// Table is a known table name (see Lookup) the rows must conform to;
	// "" infers a schema from the data.
	Table string
	// InferRows is how many rows are read before the schema is fixed: the
	// rows an inferred schema is built from, and those in which reward
	// components (r_<name> keys) are looked for (default 1,000).
	InferRows int
	// StringColumns are columns of an inferred schema imported as strings
	// whatever their values look like: JSON numbers and booleans are
	// stored as their text. Only without a Table.
	StringColumns []string
	// Write tunes the Parquet file.
	Write *WriteOptions
}

// Import reads a JSONL or CSV table from src and writes it to dst as
// Parquet, streaming (memory is bounded by InferRows and one batch). name
// identifies the input in errors. It returns the number of rows written.
//
// With a known table the rows must hold its columns: a value of the wrong
// type, an unknown column, or a missing or null required column is a
// *ValueError naming the line and column. JSON objects and arrays given
// for a string column (metadata, sampler, …) are stored as JSON text;
// in CSV, list and struct cells are JSON text.
//
// Without a table, the schema is inferred from the first InferRows rows:
// each column is bool, int64, float64 or string (JSON objects and arrays
// are string, as JSON text), all nullable, in the order of first
// appearance; ints mixed with floats are float64. Values of a column that
// disagree in type otherwise (a string among numbers, a number among
// strings, in the sample or after it) are a *ValueError naming the line,
// the column, the value and the type seen before, unless the column is one
// of StringColumns. In CSV an empty cell is null.
//
// An input without a row (empty, only blank lines, a CSV header alone) or
// whose rows hold no columns (only {} lines) fails with ErrNoRows before
// anything is written to dst.
func Import(dst io.Writer, src io.Reader, name string, opts *ImportOptions) (int64, error) {
	var o ImportOptions
	if opts != nil {
		o = *opts
	}
	if o.Format == "" {
		o.Format = JSONL
	}
	if o.InferRows <= 0 {
		o.InferRows = DefaultInferRows
	}
	var rd rowSource
	switch o.Format {
	case JSONL:
		rd = &jsonlSource{r: bufio.NewReaderSize(src, 1<<20), name: name}
	case CSV:
		cr := csv.NewReader(src)
		cr.ReuseRecord = false
		rd = &csvSource{r: cr, name: name}
	default:
		return 0, fmt.Errorf("import %s: unknown format %q (want jsonl or csv): %w", name, o.Format, errInvalid)
	}

	// Read the sample the schema is fixed from.
	var sample []inRow
	for len(sample) < o.InferRows {
		r, err := rd.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
		sample = append(sample, r)
	}
	if len(sample) == 0 {
		return 0, noRows(name, o.Format, rd)
	}
	keys := firstSeen(rd, sample)
	if len(keys) == 0 {
		// Only JSONL gets here: a CSV row has the header's columns.
		return 0, fmt.Errorf("import %s: %w with a column: every line is an empty JSON object {} (the first at line %d); give each line the row's keys and values",
			name, ErrNoRows, sample[0].line)
	}

	var (
		schema *arrow.Schema
		plain  map[string]bool
		strict = o.Table != ""
		text   = map[string]bool{}
	)
	for _, c := range o.StringColumns {
		if strict {
			return 0, fmt.Errorf("import %s: string column %q: a known table (%s) fixes its columns' types: %w", name, c, o.Table, errInvalid)
		}
		if !contains(keys, c) {
			return 0, fmt.Errorf("import %s: string column %q: no such column in the data (columns: %s): %w", name, c, strings.Join(keys, ", "), errInvalid)
		}
		text[c] = true
	}
	if strict {
		d, ok := Lookup(o.Table)
		if !ok {
			return 0, fmt.Errorf("import %s: unknown table %q: %w", name, o.Table, errInvalid)
		}
		var extra []string
		for _, k := range keys {
			if comp, ok := d.extraName(k); ok {
				extra = append(extra, comp)
			}
		}
		d, err := d.withExtra(extra)
		if err != nil {
			return 0, fmt.Errorf("import %s: %w", name, err)
		}
		schema = d.Schema()
		plain = textColumns(d)
		for _, k := range keys {
			if len(schema.FieldIndices(k)) == 0 {
				return 0, &ValueError{Input: name, Line: lineOf(sample, k), Column: k,
					Reason: fmt.Sprintf("not a column of table %s (columns: %s)", d.Name(), strings.Join(fieldNames(schema), ", "))}
			}
		}
		if o.Format == CSV {
			for _, f := range schema.Fields() {
				if !f.Nullable && !contains(keys, f.Name) {
					return 0, &ValueError{Input: name, Line: 1, Column: f.Name, Reason: "missing from the header; the column is required"}
				}
			}
		}
	} else {
		var err error
		if schema, err = inferSchema(name, o.Format, keys, sample, text); err != nil {
			return 0, err
		}
	}

	w, err := newRecordWriter(dst, schema, o.Write, plain)
	if err != nil {
		return 0, fmt.Errorf("import %s: %w", name, err)
	}
	imp := &importer{name: name, format: o.Format, schema: schema, strict: strict, text: text, inferred: len(sample), table: o.Table}
	if strict {
		d, _ := Lookup(o.Table)
		imp.unique = newUniques(d)
	}
	imp.b = array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer imp.b.Release()
	batch := w.opts.BatchRows
	flush := func() error {
		if imp.b.Field(0).Len() == 0 {
			return nil
		}
		rec := imp.b.NewRecordBatch()
		defer rec.Release()
		return w.Write(rec)
	}
	add := func(r inRow) error {
		if err := imp.add(r); err != nil {
			return err
		}
		if imp.b.Field(0).Len() >= batch {
			return flush()
		}
		return nil
	}
	var n int64
	fail := func(err error) (int64, error) {
		w.Close()
		return n, err
	}
	for _, r := range sample {
		if err := add(r); err != nil {
			return fail(err)
		}
		n++
	}
	sample = nil
	for {
		r, err := rd.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(err)
		}
		if err := add(r); err != nil {
			return fail(err)
		}
		n++
	}
	if err := flush(); err != nil {
		return fail(fmt.Errorf("import %s: %w", name, err))
	}
	if err := w.Close(); err != nil {
		return n, fmt.Errorf("import %s: %w", name, err)
	}
	return n, nil
}

// noRows is the error for an input without a row, saying what the file
// held and what a row looks like.
func noRows(name string, format Format, rd rowSource) error {
	what := "the file is empty or holds only blank lines; write one JSON object per line, e.g. {\"prompt_id\":\"p1\",\"prompt\":\"2+2=\"}"
	if c, ok := rd.(*csvSource); ok && c.header != nil {
		what = fmt.Sprintf("the file holds a header (%s) and no records below it; add one line of values per row", strings.Join(c.header, ","))
	} else if format == CSV {
		what = "the file is empty or holds only blank lines; write a header line of column names, then one line of values per row"
	}
	return fmt.Errorf("import %s: %w: %s", name, ErrNoRows, what)
}

// textColumns lists the columns written without dictionary encoding.
func textColumns(d Definition) map[string]bool {
	out := map[string]bool{}
	switch t := d.(type) {
	case *Table[Prompt]:
		markText(t, out)
	case *Table[Trajectory]:
		markText(t, out)
	case *Table[Reward]:
		markText(t, out)
	case *Table[EvalSample]:
		markText(t, out)
	}
	return out
}

func markText[T any](t *Table[T], out map[string]bool) {
	for _, c := range t.cols {
		if c.plain {
			out[c.field.Name] = true
		}
	}
}

func fieldNames(s *arrow.Schema) []string {
	out := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		out[i] = f.Name
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// inRow is one input row: keys and values in input order. JSONL values
// are decoded JSON (json.Number for numbers); CSV values are csvCell.
type inRow struct {
	line int64
	keys []string
	vals []any
}

type csvCell string

type rowSource interface {
	next() (inRow, error)
}

type jsonlSource struct {
	r    *bufio.Reader
	name string
	line int64
}

func (s *jsonlSource) next() (inRow, error) {
	for {
		b, err := s.r.ReadBytes('\n')
		if len(b) == 0 && err != nil {
			if err == io.EOF {
				return inRow{}, io.EOF
			}
			return inRow{}, fmt.Errorf("import %s: %w", s.name, err)
		}
		s.line++
		if !utf8.Valid(b) {
			return inRow{}, jsonlNotUTF8(s.name, s.line, bytes.TrimRight(b, "\r\n"))
		}
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			continue
		}
		keys, vals, perr := parseObject(b)
		if perr != nil {
			return inRow{}, fmt.Errorf("import %s line %d: %v: %w", s.name, s.line, perr, ErrBadValue)
		}
		return inRow{line: s.line, keys: keys, vals: vals}, nil
	}
}

// parseObject decodes one JSON object, keeping its key order.
func parseObject(b []byte) ([]string, []any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, fmt.Errorf("not JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, errors.New("want a JSON object per line")
	}
	var keys []string
	var vals []any
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("not JSON: %v", err)
		}
		k := tok.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, nil, fmt.Errorf("key %q: %v", k, err)
		}
		if contains(keys, k) {
			return nil, nil, fmt.Errorf("key %q appears twice", k)
		}
		keys = append(keys, k)
		vals = append(vals, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, fmt.Errorf("not JSON: %v", err)
	}
	if dec.More() {
		return nil, nil, errors.New("text after the JSON object")
	}
	return keys, vals, nil
}

type csvSource struct {
	r      *csv.Reader
	name   string
	header []string
}

func (s *csvSource) next() (inRow, error) {
	if s.header == nil {
		h, err := s.r.Read()
		if err == io.EOF {
			return inRow{}, io.EOF
		}
		if err != nil {
			return inRow{}, fmt.Errorf("import %s: header: %v: %w", s.name, err, ErrBadValue)
		}
		for i, k := range h {
			if badUTF8(k) >= 0 {
				_, col := s.r.FieldPos(i)
				return inRow{}, notUTF8(s.name, 1, k, k, k[badUTF8(k)], col+badUTF8(k))
			}
			if contains(h[:i], k) {
				return inRow{}, &ValueError{Input: s.name, Line: 1, Column: k, Reason: "appears twice in the header"}
			}
		}
		s.header = h
	}
	rec, err := s.r.Read()
	if err == io.EOF {
		return inRow{}, io.EOF
	}
	if err != nil {
		return inRow{}, fmt.Errorf("import %s: %v: %w", s.name, err, ErrBadValue)
	}
	line, _ := s.r.FieldPos(0)
	vals := make([]any, len(rec))
	for i, c := range rec {
		if off := badUTF8(c); off >= 0 {
			l, col := s.r.FieldPos(i)
			column := ""
			if i < len(s.header) {
				column = s.header[i]
			}
			return inRow{}, notUTF8(s.name, int64(l), column, c, c[off], col+off)
		}
		vals[i] = csvCell(c)
	}
	return inRow{line: int64(line), keys: s.header, vals: vals}, nil
}

// firstSeen returns the keys of the sample rows (or the CSV header) in
// order of first appearance.
func firstSeen(src rowSource, sample []inRow) []string {
	if c, ok := src.(*csvSource); ok {
		return c.header
	}
	var keys []string
	seen := map[string]bool{}
	for _, r := range sample {
		for _, k := range r.keys {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	return keys
}

func lineOf(sample []inRow, key string) int64 {
	for _, r := range sample {
		if contains(r.keys, key) {
			return r.line
		}
	}
	return 1
}

// Inferred kinds, in widening order for numbers.
const (
	kNone = iota
	kBool
	kInt
	kFloat
	kString
)

func kindOf(v any) int {
	switch v := v.(type) {
	case nil:
		return kNone
	case bool:
		return kBool
	case json.Number:
		if _, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return kInt
		}
		return kFloat
	case csvCell:
		s := string(v)
		if s == "" {
			return kNone
		}
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			return kInt
		}
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return kFloat
		}
		if s == "true" || s == "false" {
			return kBool
		}
	}
	return kString
}

func widen(a, b int) int {
	switch {
	case a == kNone:
		return b
	case b == kNone || a == b:
		return a
	case (a == kInt || a == kFloat) && (b == kInt || b == kFloat):
		return kFloat
	}
	return kString
}

// kindNames name the inferred kinds in errors, as the schema does.
var kindNames = [...]string{kNone: "null", kBool: "bool", kInt: "int64", kFloat: "float64", kString: "string"}

// inferSchema fixes each column's type from the sample rows. Columns in
// text are strings; in any other, values that disagree in type (but ints
// with floats) are an error naming the first line that disagrees.
func inferSchema(name string, format Format, keys []string, sample []inRow, text map[string]bool) (*arrow.Schema, error) {
	type seen struct {
		kind int
		line int64 // where a value of kind was first seen
	}
	cols := make(map[string]seen, len(keys))
	for _, r := range sample {
		for i, k := range r.keys {
			if i >= len(r.vals) || text[k] {
				continue
			}
			c, kind := cols[k], kindOf(r.vals[i])
			w := widen(c.kind, kind)
			if w == kString && kind != kNone && c.kind != kNone && c.kind != kind {
				return nil, &ValueError{Input: name, Line: r.line, Column: k, Want: kindNames[c.kind], Value: shorten(r.vals[i]),
					Reason: fmt.Sprintf("the column holds %s values from line %d on, and a column holds one type (%s)", kindNames[c.kind], c.line, asText(format, k))}
			}
			if c.kind == kNone {
				c.line = r.line
			}
			c.kind = w
			cols[k] = c
		}
	}
	fields := make([]arrow.Field, len(keys))
	for i, k := range keys {
		var t arrow.DataType = arrow.BinaryTypes.String
		switch cols[k].kind {
		case kBool:
			t = arrow.FixedWidthTypes.Boolean
		case kInt:
			t = arrow.PrimitiveTypes.Int64
		case kFloat:
			t = arrow.PrimitiveTypes.Float64
		}
		if text[k] {
			t = arrow.BinaryTypes.String
		}
		fields[i] = arrow.Field{Name: k, Type: t, Nullable: true}
	}
	return arrow.NewSchema(fields, nil), nil
}

// asText says how to import column k as text whatever its values.
func asText(format Format, k string) string {
	if format == CSV {
		return fmt.Sprintf("to import it as text, name it a string column: rlpipe import --string %s", k)
	}
	return fmt.Sprintf("to import it as text, quote its values, or name it a string column: rlpipe import --string %s", k)
}

type importer struct {
	name     string
	format   Format
	schema   *arrow.Schema
	b        *array.RecordBuilder
	strict   bool            // a known table's schema
	text     map[string]bool // string columns of an inferred schema
	inferred int
	set      []bool
	table    string  // the known table, or ""
	unique   uniques // its unique columns' values so far
}

// add appends one input row; every column not in the row is null.
func (im *importer) add(r inRow) error {
	if im.set == nil {
		im.set = make([]bool, im.schema.NumFields())
	}
	clear(im.set)
	for i, k := range r.keys {
		if i >= len(r.vals) {
			break
		}
		idx := im.schema.FieldIndices(k)
		if len(idx) == 0 {
			return &ValueError{Input: im.name, Line: r.line, Column: k,
				Reason: fmt.Sprintf("not a column (columns: %s)", strings.Join(fieldNames(im.schema), ", "))}
		}
		f := im.schema.Field(idx[0])
		// Only a string column named so takes numbers and booleans as text.
		if err := appendIn(im.b.Field(idx[0]), f, r.vals[i], !im.text[k]); err != nil {
			ve := &ValueError{Input: im.name, Line: r.line, Column: k, Want: f.Type.String(), Value: shorten(r.vals[i]), Reason: err.Error()}
			if !im.strict {
				ve.Reason += fmt.Sprintf(" (the type was inferred from the first %d rows; raise InferRows or import into a known table; %s)", im.inferred, asText(im.format, k))
			}
			return ve
		}
		im.set[idx[0]] = true
		if err := im.unique.see(im.name, im.table, r.line, k, r.vals[i]); err != nil {
			return err
		}
	}
	for i, f := range im.schema.Fields() {
		if im.set[i] {
			continue
		}
		if !f.Nullable {
			return &ValueError{Input: im.name, Line: r.line, Column: f.Name, Want: f.Type.String(), Value: "nothing",
				Reason: "the column is required"}
		}
		im.b.Field(i).AppendNull()
	}
	return nil
}

func shorten(v any) string {
	var s string
	switch v := v.(type) {
	case nil:
		s = "null"
	case csvCell:
		s = strconv.Quote(string(v))
	default:
		// v was decoded from JSON and encodes again; should it not, the
		// message shows it as Go prints it rather than as nothing.
		if b, err := json.Marshal(v); err == nil {
			s = string(b)
		} else {
			s = fmt.Sprintf("%v", v)
		}
	}
	if len(s) > 60 {
		s = s[:57] + "…"
	}
	return s
}

// appendIn appends an input value to b (of field f's type). Unless
// strict, string columns take numbers and booleans as text (the string
// columns of an inferred schema).
func appendIn(b array.Builder, f arrow.Field, v any, strict bool) error {
	if c, ok := v.(csvCell); ok {
		return appendCell(b, f, string(c), strict)
	}
	if v == nil {
		if !f.Nullable {
			return errors.New("null in a required column")
		}
		b.AppendNull()
		return nil
	}
	switch bb := b.(type) {
	case *array.StringBuilder:
		switch v := v.(type) {
		case string:
			bb.Append(v)
		case map[string]any, []any:
			j, err := json.Marshal(v)
			if err != nil {
				return err
			}
			bb.Append(string(j))
		case json.Number:
			if strict {
				return errors.New("a number where text is expected (quote it)")
			}
			bb.Append(string(v))
		case bool:
			if strict {
				return errors.New("a boolean where text is expected (quote it)")
			}
			bb.Append(strconv.FormatBool(v))
		}
	case *array.Int32Builder:
		return appendNumber(v, 32, jsonInt, func(n int64) { bb.Append(int32(n)) })
	case *array.Int64Builder:
		return appendNumber(v, 64, jsonInt, bb.Append)
	case *array.Float64Builder:
		return appendNumber(v, 64, jsonFloat, bb.Append)
	case *array.Float32Builder:
		return appendNumber(v, 32, jsonFloat, func(x float64) { bb.Append(float32(x)) })
	case *array.BooleanBuilder:
		x, ok := v.(bool)
		if !ok {
			return errors.New("not true or false")
		}
		bb.Append(x)
	case *array.ListBuilder:
		list, ok := v.([]any)
		if !ok {
			return errors.New("not a JSON array")
		}
		ef := f.Type.(*arrow.ListType).ElemField()
		bb.Append(true)
		for j, e := range list {
			if err := appendIn(bb.ValueBuilder(), ef, e, strict); err != nil {
				return fmt.Errorf("element %d: %v", j, err)
			}
		}
	case *array.StructBuilder:
		obj, ok := v.(map[string]any)
		if !ok {
			return errors.New("not a JSON object")
		}
		st := f.Type.(*arrow.StructType)
		for k := range obj {
			if _, ok := st.FieldIdx(k); !ok {
				return fmt.Errorf("unknown field %q (fields: %s)", k, strings.Join(structNames(st), ", "))
			}
		}
		bb.Append(true)
		for k, sf := range st.Fields() {
			if err := appendIn(bb.FieldBuilder(k), sf, obj[sf.Name], strict); err != nil {
				return fmt.Errorf("field %q: %v", sf.Name, err)
			}
		}
	default:
		return fmt.Errorf("cannot import into %s", f.Type)
	}
	return nil
}

// appendNumber parses the JSON number v as a number of bits with parse
// and appends it with add.
func appendNumber[N any](v any, bits int, parse func(any, int) (N, error), add func(N)) error {
	n, err := parse(v, bits)
	if err != nil {
		return err
	}
	add(n)
	return nil
}

func structNames(st *arrow.StructType) []string {
	out := make([]string, st.NumFields())
	for i, f := range st.Fields() {
		out[i] = f.Name
	}
	return out
}

func jsonInt(v any, bits int) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, errors.New("not a number")
	}
	x, err := strconv.ParseInt(string(n), 10, bits)
	if err != nil {
		return 0, fmt.Errorf("not an int%d", bits)
	}
	return x, nil
}

func jsonFloat(v any, bits int) (float64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, errors.New("not a number")
	}
	x, err := strconv.ParseFloat(string(n), bits)
	if err != nil {
		return 0, fmt.Errorf("not a float%d", bits)
	}
	return x, nil
}

// appendCell appends a CSV cell: scalars parse from text, lists and
// structs from JSON text; an empty cell is null (or "" / an empty list for
// a required string / list column).
func appendCell(b array.Builder, f arrow.Field, s string, strict bool) error {
	if s == "" {
		switch {
		case f.Nullable:
			b.AppendNull()
		case f.Type.ID() == arrow.STRING:
			b.(*array.StringBuilder).Append("")
		case f.Type.ID() == arrow.LIST:
			b.(*array.ListBuilder).Append(true)
		default:
			return errors.New("empty cell in a required column")
		}
		return nil
	}
	switch bb := b.(type) {
	case *array.StringBuilder:
		bb.Append(s)
		return nil
	case *array.BooleanBuilder:
		x, err := strconv.ParseBool(s)
		if err != nil {
			return errors.New("not true or false")
		}
		bb.Append(x)
		return nil
	case *array.ListBuilder, *array.StructBuilder:
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("not JSON: %v", err)
		}
		return appendIn(b, f, v, strict)
	}
	// Numbers: parse as JSON numbers so the checks are shared.
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		return errors.New("not a number")
	}
	return appendIn(b, f, json.Number(s), strict)
}

// Export writes every row of f to dst as JSONL or CSV. JSONL rows are
// objects with keys in schema order; nested values stay nested. CSV has a
// header row; null is an empty cell and lists, structs and maps are JSON
// text. Floats that JSON cannot hold (NaN, ±Inf) are null in JSONL.
func Export(ctx context.Context, dst io.Writer, f *File, format Format) error {
	switch format {
	case JSONL:
		bw := bufio.NewWriterSize(dst, 1<<20)
		names := make([][]byte, f.Schema().NumFields())
		for i, fl := range f.Schema().Fields() {
			names[i] = appendJSONString(nil, fl.Name)
		}
		var buf []byte
		for rec, err := range f.Records(ctx) {
			if err != nil {
				return err
			}
			cols := rec.Columns()
			for i := 0; i < int(rec.NumRows()); i++ {
				buf = append(buf[:0], '{')
				for j, c := range cols {
					if j > 0 {
						buf = append(buf, ',')
					}
					buf = append(buf, names[j]...)
					buf = append(buf, ':')
					buf = appendJSON(buf, c, i)
				}
				buf = append(buf, '}', '\n')
				if _, err := bw.Write(buf); err != nil {
					return fmt.Errorf("export %s: %w", f.name, err)
				}
			}
		}
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("export %s: %w", f.name, err)
		}
		return nil
	case CSV:
		cw := csv.NewWriter(dst)
		if err := cw.Write(fieldNames(f.Schema())); err != nil {
			return fmt.Errorf("export %s: %w", f.name, err)
		}
		row := make([]string, f.Schema().NumFields())
		for rec, err := range f.Records(ctx) {
			if err != nil {
				return err
			}
			cols := rec.Columns()
			for i := 0; i < int(rec.NumRows()); i++ {
				for j, c := range cols {
					row[j] = cellText(c, i)
				}
				if err := cw.Write(row); err != nil {
					return fmt.Errorf("export %s: %w", f.name, err)
				}
			}
		}
		cw.Flush()
		if err := cw.Error(); err != nil {
			return fmt.Errorf("export %s: %w", f.name, err)
		}
		return nil
	}
	return fmt.Errorf("export %s: unknown format %q (want jsonl or csv): %w", f.name, format, errInvalid)
}
