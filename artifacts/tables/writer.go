package tables

import (
	"fmt"
	"io"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/rlpipe/rlpipe/artifacts"
)

// Defaults for WriteOptions.
const (
	DefaultRowGroupRows  = 64 * 1024
	DefaultRowGroupBytes = 8 << 20
	DefaultBatchRows     = 4096
	DefaultBatchBytes    = 4 << 20
	DefaultZstdLevel     = 1
)

// WriteOptions tune how a file is written. A nil *WriteOptions means the
// defaults; zero fields take their default.
type WriteOptions struct {
	// RowGroupRows ends a row group after this many rows (default 65,536).
	RowGroupRows int
	// RowGroupBytes ends a row group once its rows hold about this many
	// bytes as Arrow data, before compression (default 8 MiB). Row groups
	// bound the memory of writers, which hold a row group's compressed
	// pages until it ends, and are the unit of parallel reads.
	RowGroupBytes int64
	// BatchRows is how many rows Writer.Write buffers before encoding them
	// (default 4,096).
	BatchRows int
	// BatchBytes encodes the rows Writer.Write buffered once they hold
	// this many bytes as Arrow data, before BatchRows (default 4 MiB): a
	// batch of 4,096 trajectories of 2,048 tokens would otherwise hold
	// 64 MiB, and encoding a batch allocates about as much again (its
	// lists' levels, its pages).
	BatchBytes int64
	// ZstdLevel is the zstd compression level (default 1).
	ZstdLevel int
}

func (o *WriteOptions) withDefaults() WriteOptions {
	v := artifacts.ValueOf(o)
	if v.RowGroupRows <= 0 {
		v.RowGroupRows = DefaultRowGroupRows
	}
	if v.RowGroupBytes <= 0 {
		v.RowGroupBytes = DefaultRowGroupBytes
	}
	if v.BatchRows <= 0 {
		v.BatchRows = DefaultBatchRows
	}
	if v.BatchBytes <= 0 {
		v.BatchBytes = DefaultBatchBytes
	}
	if v.ZstdLevel == 0 {
		v.ZstdLevel = DefaultZstdLevel
	}
	return v
}

// RecordWriter writes Arrow record batches of one schema to a Parquet
// file: zstd pages, row groups bounded by rows and bytes. It is the
// untyped layer under Writer, used directly for files of no known table.
// Its output depends only on the records written, never on timing, so the
// same records give byte-identical files.
type RecordWriter struct {
	fw      *pqarrow.FileWriter
	schema  *arrow.Schema
	opts    WriteOptions
	rgRows  int64
	rgBytes int64
	newRG   bool
	rows    int64
	err     error
}

// noClose hides the destination's Close: closing the file is the caller's
// business.
type noClose struct{ w io.Writer }

func (n noClose) Write(p []byte) (int, error) { return n.w.Write(p) }

// NewRecordWriter starts a Parquet file with the given Arrow schema. Its
// metadata is written to the Parquet key-value metadata (with the Arrow
// schema itself, as other Arrow-based readers expect).
func NewRecordWriter(w io.Writer, schema *arrow.Schema, opts *WriteOptions) (*RecordWriter, error) {
	return newRecordWriter(w, schema, opts, nil)
}

// newRecordWriter is NewRecordWriter with the top-level columns in plain
// stored without dictionary encoding.
func newRecordWriter(w io.Writer, schema *arrow.Schema, opts *WriteOptions, plain map[string]bool) (*RecordWriter, error) {
	o := opts.withDefaults()
	props, err := writerProps(schema, o, plain)
	if err != nil {
		return nil, err
	}
	fw, err := pqarrow.NewFileWriter(schema, noClose{w}, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, fmt.Errorf("start parquet file: %w", err)
	}
	return &RecordWriter{fw: fw, schema: schema, opts: o}, nil
}

// writerProps builds the Parquet properties: zstd everywhere, dictionary
// encoding except for the leaves of plain columns listed in plain.
func writerProps(schema *arrow.Schema, o WriteOptions, plain map[string]bool) (*parquet.WriterProperties, error) {
	base := []parquet.WriterProperty{
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithCompressionLevel(o.ZstdLevel),
		parquet.WithMaxRowGroupLength(int64(o.RowGroupRows)),
		parquet.WithAllocator(memory.NewGoAllocator()),
	}
	if len(plain) == 0 {
		return parquet.NewWriterProperties(base...), nil
	}
	// Leaf paths of nested columns ("turns.list.element.content") are only
	// known after the Parquet schema is derived.
	pq, err := pqarrow.ToParquet(schema, parquet.NewWriterProperties(base...), pqarrow.DefaultWriterProps())
	if err != nil {
		return nil, fmt.Errorf("derive parquet schema: %w", err)
	}
	for i := 0; i < pq.NumColumns(); i++ {
		path := pq.Column(i).ColumnPath()
		if plain[path[0]] {
			base = append(base, parquet.WithDictionaryFor(path.String(), false))
		}
	}
	return parquet.NewWriterProperties(base...), nil
}

// Write appends a record batch. Its schema must equal the writer's.
func (w *RecordWriter) Write(rec arrow.RecordBatch) error {
	if w.err != nil {
		return w.err
	}
	if !rec.Schema().Equal(w.schema) {
		return fmt.Errorf("write record: schema %s does not match the file's %s: %w", rec.Schema(), w.schema, ErrSchemaMismatch)
	}
	n := rec.NumRows()
	if n == 0 {
		return nil
	}
	size := util.TotalRecordSize(rec)
	for off := int64(0); off < n; {
		if w.newRG {
			if err := w.fw.NewBufferedRowGroupChecked(); err != nil {
				return w.fail(err)
			}
			w.newRG = false
		}
		take := min(n-off, int64(w.opts.RowGroupRows)-w.rgRows)
		// Split by bytes too: take the rows that fit in what is left.
		if left := w.opts.RowGroupBytes - w.rgBytes; size > 0 && take*size/n > left {
			take = max(1, left*n/size)
		}
		part := rec
		if off != 0 || take != n {
			part = rec.NewSlice(off, off+take)
		}
		err := w.fw.WriteBuffered(part)
		if part != rec {
			part.Release()
		}
		if err != nil {
			return w.fail(err)
		}
		off += take
		w.rows += take
		w.rgRows += take
		w.rgBytes += take * size / n
		if w.rgRows >= int64(w.opts.RowGroupRows) || w.rgBytes >= w.opts.RowGroupBytes {
			w.newRG, w.rgRows, w.rgBytes = true, 0, 0
		}
	}
	return nil
}

func (w *RecordWriter) fail(err error) error {
	w.err = fmt.Errorf("write parquet: %w", err)
	return w.err
}

// NumRows returns the rows written so far.
func (w *RecordWriter) NumRows() int64 { return w.rows }

// Close writes the footer. It does not close the destination.
func (w *RecordWriter) Close() error {
	err := w.fw.Close()
	if w.err != nil {
		return w.err
	}
	if err != nil {
		return fmt.Errorf("finish parquet file: %w", err)
	}
	return nil
}

// Writer writes rows of one table to a Parquet file, buffering
// WriteOptions.BatchRows rows at a time, so memory stays bounded however
// many rows are written. Close must be called to finish the file.
type Writer[T any] struct {
	t    *Table[T]
	rw   *RecordWriter
	b    *array.RecordBuilder
	size builderSize
	encs []func(*T)
	n    int
	err  error
}

// NewWriter starts a file of table t. For the rewards table, t must list
// the components (RewardsWith) the rows use.
func NewWriter[T any](w io.Writer, t *Table[T], opts *WriteOptions) (*Writer[T], error) {
	plain := map[string]bool{}
	markText(t, plain)
	rw, err := newRecordWriter(w, t.schema, opts, plain)
	if err != nil {
		return nil, fmt.Errorf("start %s file: %w", t.name, err)
	}
	b := array.NewRecordBuilder(memory.NewGoAllocator(), t.schema)
	encs := make([]func(*T), len(t.cols))
	for i, c := range t.cols {
		encs[i] = c.enc(b.Field(i))
	}
	return &Writer[T]{t: t, rw: rw, b: b, size: newBuilderSize(b.Fields()), encs: encs}, nil
}

// Write appends rows. A row that does not fit the table (an unknown
// trajectory status, a reward component without a column) fails the call
// with an error wrapping artifacts.ErrInvalid; rows before it are kept.
func (w *Writer[T]) Write(rows ...T) error {
	if w.err != nil {
		return w.err
	}
	for i := range rows {
		r := &rows[i]
		if err := w.t.validate(r); err != nil {
			return fmt.Errorf("write %s row %d: %w", w.t.name, w.rw.rows+int64(w.n), err)
		}
		for _, enc := range w.encs {
			enc(r)
		}
		w.n++
		if w.n >= w.rw.opts.BatchRows || w.size.bytes() >= w.rw.opts.BatchBytes {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// WriteRecord appends a record batch of the table's schema (Table.Schema,
// metadata included), after any rows buffered by Write.
func (w *Writer[T]) WriteRecord(rec arrow.RecordBatch) error {
	if err := w.flush(); err != nil {
		return err
	}
	if err := w.rw.Write(rec); err != nil {
		return fmt.Errorf("write %s: %w", w.t.name, err)
	}
	return nil
}

func (w *Writer[T]) flush() error {
	if w.err != nil {
		return w.err
	}
	if w.n == 0 {
		return nil
	}
	rec := w.b.NewRecordBatch()
	defer rec.Release()
	w.n = 0
	if err := w.rw.Write(rec); err != nil {
		w.err = fmt.Errorf("write %s: %w", w.t.name, err)
		return w.err
	}
	return nil
}

// NumRows returns the rows written so far, buffered ones included.
func (w *Writer[T]) NumRows() int64 { return w.rw.rows + int64(w.n) }

// Close flushes buffered rows and writes the footer. It does not close the
// destination.
func (w *Writer[T]) Close() error {
	ferr := w.flush()
	w.b.Release()
	cerr := w.rw.Close()
	if ferr != nil {
		return ferr
	}
	return cerr
}

// builderSize tells how many bytes of Arrow data a record builder holds,
// from its builders' lengths: the fixed-width ones' values, the binary
// ones' data and the offsets of lists and binaries (validity bitmaps are
// left out). It reads lengths only, so it is cheap enough to ask after
// every row.
type builderSize []sizedBuilder

type sizedBuilder struct {
	b     array.Builder
	width int64                // bytes a value, fixed-width and offsets
	bin   *array.BinaryBuilder // its data too, for strings and binaries
}

// newBuilderSize flattens the builder trees of a record's fields.
func newBuilderSize(fields []array.Builder) builderSize {
	var s builderSize
	var walk func(array.Builder)
	walk = func(b array.Builder) {
		switch b := b.(type) {
		case *array.BinaryBuilder:
			s = append(s, sizedBuilder{b: b, width: 4, bin: b})
		case *array.StringBuilder:
			s = append(s, sizedBuilder{b: b, width: 4, bin: b.BinaryBuilder})
		case *array.ListBuilder:
			s = append(s, sizedBuilder{b: b, width: 4})
			walk(b.ValueBuilder())
		case *array.StructBuilder:
			for i := 0; i < b.NumField(); i++ {
				walk(b.FieldBuilder(i))
			}
		default:
			if fw, ok := b.Type().(arrow.FixedWidthDataType); ok && fw.BitWidth() >= 8 {
				s = append(s, sizedBuilder{b: b, width: int64(fw.BitWidth() / 8)})
			}
		}
	}
	for _, b := range fields {
		walk(b)
	}
	return s
}

func (s builderSize) bytes() int64 {
	var n int64
	for _, e := range s {
		n += int64(e.b.Len()) * e.width
		if e.bin != nil {
			n += int64(e.bin.DataLen())
		}
	}
	return n
}

// Write writes rows as one Parquet file of table t. For the rewards table
// without components, the components are the sorted union of those the
// rows use.
func Write[T any](w io.Writer, t *Table[T], rows []T, opts *WriteOptions) error {
	if t.dyn != nil && len(t.dyn.names) == 0 {
		nt, err := t.extend(t.dyn.collect(rows))
		if err != nil {
			return err
		}
		t = nt
	}
	tw, err := NewWriter(w, t, opts)
	if err != nil {
		return err
	}
	if err := tw.Write(rows...); err != nil {
		tw.Close()
		return err
	}
	return tw.Close()
}

// WriteSeq writes the rows of a sequence as one Parquet file of table t,
// holding at most one batch of rows in memory.
func WriteSeq[T any](w io.Writer, t *Table[T], rows iter.Seq[T], opts *WriteOptions) error {
	tw, err := NewWriter(w, t, opts)
	if err != nil {
		return err
	}
	for r := range rows {
		if err := tw.Write(r); err != nil {
			tw.Close()
			return err
		}
	}
	return tw.Close()
}
