package tables

import (
	"context"
	"fmt"
	"io"
	"iter"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// DefaultBatchRows is the default number of rows in a record batch read.
const DefaultReadBatchRows = 8192

// ReadOptions tune reading. A nil *ReadOptions means the defaults.
type ReadOptions struct {
	// BatchRows is the number of rows per record batch (default 8,192).
	// Memory held by a reader is about one batch plus one buffer per
	// column, whatever the file size.
	BatchRows int
	// Parallel decodes the columns of a batch concurrently. Leave it off
	// for files from untrusted sources: a corrupt file can make the Parquet
	// library panic in a goroutine this package cannot guard.
	Parallel bool
	// RowGroups restricts reading to these row groups (nil: all), so that
	// callers can split a file among workers.
	RowGroups []int
}

func (o *ReadOptions) withDefaults() ReadOptions {
	var v ReadOptions
	if o != nil {
		v = *o
	}
	if v.BatchRows <= 0 {
		v.BatchRows = DefaultReadBatchRows
	}
	return v
}

// File is any Parquet file opened for reading: its Arrow schema, its
// metadata and its rows as record batches or maps. It is what `rlpipe cat`
// reads; Reader adds a table's validation and typed rows on top of it.
type File struct {
	name   string
	pf     *file.Reader
	fr     *pqarrow.FileReader
	schema *arrow.Schema
	opts   ReadOptions
	// leaves[i] lists the Parquet leaf columns of top-level field i.
	leaves [][]int
}

// OpenFile opens the Parquet file held by r (size bytes). name identifies
// the file in errors. A file that is not Parquet, is truncated or has a
// corrupt footer gives an error wrapping ErrNotParquet.
func OpenFile(r io.ReaderAt, size int64, name string, opts *ReadOptions) (f *File, err error) {
	defer recoverCorrupt(name, &err)
	o := opts.withDefaults()
	mem := memory.NewGoAllocator()
	props := parquet.NewReaderProperties(mem)
	// Stream column chunks through a bounded buffer rather than reading a
	// whole chunk at once: memory stays bounded, and a corrupt chunk length
	// cannot make the reader allocate it.
	props.BufferedStreamEnabled = true
	props.BufferSize = 1 << 20
	if size < 0 {
		return nil, fmt.Errorf("open %q: negative size %d: %w", name, size, errInvalid)
	}
	pf, err := file.NewParquetReader(io.NewSectionReader(r, 0, size), file.WithReadProps(props))
	if err != nil {
		return nil, fmt.Errorf("open %q: %w: %v", name, ErrNotParquet, err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(o.BatchRows), Parallel: o.Parallel}, mem)
	if err != nil {
		return nil, fmt.Errorf("open %q: %w: %v", name, ErrNotParquet, err)
	}
	sc, err := fr.Schema()
	if err != nil {
		return nil, fmt.Errorf("open %q: %w: %v", name, ErrNotParquet, err)
	}
	for _, rg := range o.RowGroups {
		if rg < 0 || rg >= pf.NumRowGroups() {
			return nil, fmt.Errorf("open %q: row group %d out of range [0, %d): %w", name, rg, pf.NumRowGroups(), errInvalid)
		}
	}
	f = &File{name: name, pf: pf, fr: fr, schema: sc, opts: o}
	f.leaves = make([][]int, sc.NumFields())
	ps := pf.MetaData().Schema
	for i := 0; i < ps.NumColumns(); i++ {
		root := ps.ColumnRoot(i)
		if j := ps.Root().FieldIndexByName(root.Name()); j >= 0 && j < len(f.leaves) {
			f.leaves[j] = append(f.leaves[j], i)
		}
	}
	return f, nil
}

// recoverCorrupt turns a panic of the Parquet library on corrupt input
// into an error.
func recoverCorrupt(name string, err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("read %q: %w: corrupt data (%v)", name, ErrNotParquet, p)
	}
}

// Name returns the name the file was opened with.
func (f *File) Name() string { return f.name }

// Schema returns the file's Arrow schema (the stored Arrow schema when the
// writer recorded one, else the one derived from the Parquet schema).
func (f *File) Schema() *arrow.Schema { return f.schema }

// NumRows returns the number of rows in the file.
func (f *File) NumRows() int64 { return f.pf.NumRows() }

// NumRowGroups returns the number of row groups.
func (f *File) NumRowGroups() int { return f.pf.NumRowGroups() }

// Metadata returns the value of a Parquet key-value metadata entry.
func (f *File) Metadata(key string) (string, bool) {
	v := f.pf.MetaData().KeyValueMetadata().FindValue(key)
	if v == nil {
		return "", false
	}
	return *v, true
}

// Table returns the rlpipe table name and schema version recorded in the
// file, or "" and 0 for files written by other tools.
func (f *File) Table() (name string, version int) {
	name, _ = f.Metadata(MetaTable)
	if v, ok := f.Metadata(MetaSchemaVersion); ok {
		version, _ = strconv.Atoi(v)
	}
	return name, version
}

// Close releases the file. It does not close the underlying reader.
func (f *File) Close() error { return nil }

// Records yields the file's rows as record batches of at most
// ReadOptions.BatchRows rows, reading one batch at a time. A batch is
// released when the loop body returns: call Retain to keep it longer.
func (f *File) Records(ctx context.Context) iter.Seq2[arrow.RecordBatch, error] {
	all := make([]int, len(f.leaves))
	for i := range all {
		all[i] = i
	}
	return f.records(ctx, all)
}

// records yields batches holding the top-level fields listed (in file
// order).
func (f *File) records(ctx context.Context, fields []int) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		var leaves []int
		for _, i := range fields {
			leaves = append(leaves, f.leaves[i]...)
		}
		if len(leaves) == 0 || f.pf.NumRows() == 0 {
			return
		}
		var rr pqarrow.RecordReader
		err := f.guard(func() (err error) {
			rr, err = f.fr.GetRecordReader(ctx, leaves, f.opts.RowGroups)
			return err
		})
		if err != nil {
			yield(nil, fmt.Errorf("read %q: %w", f.name, err))
			return
		}
		defer rr.Release()
		for {
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			var ok bool
			if err := f.guard(func() error { ok = rr.Next(); return nil }); err != nil {
				yield(nil, err)
				return
			}
			if !ok {
				if err := rr.Err(); err != nil {
					yield(nil, fmt.Errorf("read %q: %w", f.name, err))
				}
				return
			}
			if !yield(rr.RecordBatch(), nil) {
				return
			}
		}
	}
}

func (f *File) guard(fn func() error) (err error) {
	defer recoverCorrupt(f.name, &err)
	return fn()
}

// Rows yields each row as a map from column name to a Go value (see
// Value). It is meant for display and export, not for speed.
func (f *File) Rows(ctx context.Context) iter.Seq2[map[string]any, error] {
	return func(yield func(map[string]any, error) bool) {
		for rec, err := range f.Records(ctx) {
			if err != nil {
				yield(nil, err)
				return
			}
			for i := 0; i < int(rec.NumRows()); i++ {
				row := make(map[string]any, rec.NumCols())
				for j, c := range rec.Columns() {
					row[rec.ColumnName(j)] = Value(c, i)
				}
				if !yield(row, nil) {
					return
				}
			}
		}
	}
}

// Reader reads one table's rows from a Parquet file, checked against the
// table's schema when opened.
type Reader[T any] struct {
	f *File
	t *Table[T]
	// idx[i] is the file's field index for the table's column i.
	idx []int
	// order lists the file fields read, in file order; pos[i] is where
	// table column i is in a batch read.
	order, pos []int
}

// NewReader opens the file held by r (size bytes) as a file of table t.
// name identifies the file in errors. The file must hold every column of
// the table with a compatible type (see the package documentation);
// extra columns are ignored. For the rewards table the r_<component>
// columns found in the file become the components (see Reader.Table).
func NewReader[T any](r io.ReaderAt, size int64, name string, t *Table[T], opts *ReadOptions) (*Reader[T], error) {
	f, err := OpenFile(r, size, name, opts)
	if err != nil {
		return nil, err
	}
	def, idx, err := match(f, t)
	if err != nil {
		return nil, err
	}
	rd := &Reader[T]{f: f, t: def.(*Table[T]), idx: idx}
	rd.order, rd.pos = readOrder(idx)
	return rd, nil
}

// readOrder sorts the file field indices and gives each table column its
// position among them.
func readOrder(idx []int) (order, pos []int) {
	inFile := make([]int, len(idx))
	copy(inFile, idx)
	for i := 1; i < len(inFile); i++ {
		for j := i; j > 0 && inFile[j] < inFile[j-1]; j-- {
			inFile[j], inFile[j-1] = inFile[j-1], inFile[j]
		}
	}
	pos = make([]int, len(idx))
	for i, fi := range idx {
		for k, v := range inFile {
			if v == fi {
				pos[i] = k
			}
		}
	}
	return inFile, pos
}

// Table returns the table as found in the file: for rewards, with the
// file's components.
func (r *Reader[T]) Table() *Table[T] { return r.t }

// File returns the underlying file.
func (r *Reader[T]) File() *File { return r.f }

// Schema returns the schema of the batches Records yields: the table's
// canonical schema.
func (r *Reader[T]) Schema() *arrow.Schema { return r.t.schema }

// NumRows returns the number of rows in the file.
func (r *Reader[T]) NumRows() int64 { return r.f.NumRows() }

// Close releases the reader. It does not close the underlying reader.
func (r *Reader[T]) Close() error { return r.f.Close() }

// Records yields record batches of the table's canonical schema, one at a
// time. A batch is released when the loop body returns: call Retain to
// keep it longer. A null in a required column is an error naming the
// column and row.
func (r *Reader[T]) Records(ctx context.Context) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		var row int64
		cols := make([]arrow.Array, len(r.idx))
		for rec, err := range r.f.records(ctx, r.order) {
			if err != nil {
				yield(nil, err)
				return
			}
			out, err := r.conform(rec, row, cols)
			if err != nil {
				yield(nil, err)
				return
			}
			row += rec.NumRows()
			ok := yield(out, nil)
			out.Release()
			if !ok {
				return
			}
		}
	}
}

// conform turns a batch read from the file into one of the canonical
// schema, converting compatible types and rejecting nulls in required
// columns.
func (r *Reader[T]) conform(rec arrow.RecordBatch, row int64, cols []arrow.Array) (arrow.RecordBatch, error) {
	for i, c := range r.t.cols {
		a := rec.Column(r.pos[i])
		if !c.field.Nullable && a.NullN() > 0 {
			for j := 0; j < a.Len(); j++ {
				if a.IsNull(j) {
					for _, p := range cols[:i] {
						p.Release()
					}
					return nil, &SchemaError{File: r.f.name, Table: r.t.name, Column: c.field.Name,
						Want: "no nulls", Found: fmt.Sprintf("null at row %d", row+int64(j)),
						Hint: "the column is required; fill the nulls before writing"}
				}
			}
		}
		ca, err := conformArray(c.field.Type, a)
		if err != nil {
			for _, p := range cols[:i] {
				p.Release()
			}
			return nil, fmt.Errorf("read %s file %q: column %q: %w", r.t.name, r.f.name, c.field.Name, err)
		}
		cols[i] = ca
	}
	out := array.NewRecordBatch(r.t.schema, cols, rec.NumRows())
	for i := range cols {
		cols[i].Release()
		cols[i] = nil
	}
	return out, nil
}

// Rows yields the file's rows as values of T, decoding one batch at a
// time. Strings in a row share memory with the batch they came from (no
// copy); they stay valid as long as the row is referenced.
func (r *Reader[T]) Rows(ctx context.Context) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		decs := make([]func(int, *T), len(r.t.cols))
		for rec, err := range r.Records(ctx) {
			if err != nil {
				yield(zero, err)
				return
			}
			for i, c := range r.t.cols {
				decs[i] = c.dec(rec.Column(i))
			}
			n := int(rec.NumRows())
			for i := 0; i < n; i++ {
				var row T
				for _, d := range decs {
					d(i, &row)
				}
				if !yield(row, nil) {
					return
				}
			}
		}
	}
}

// Read reads every row of a file of table t.
func Read[T any](r io.ReaderAt, size int64, name string, t *Table[T]) ([]T, error) {
	rd, err := NewReader(r, size, name, t, nil)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	out := make([]T, 0, rd.NumRows())
	for row, err := range rd.Rows(context.Background()) {
		if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, nil
}
