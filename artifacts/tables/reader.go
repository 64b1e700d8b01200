package tables

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"runtime"
	"strconv"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/rlpipe/rlpipe/artifacts"
)

// DefaultReadBatchRows is the default number of rows in a record batch
// read; DefaultReadBatchBytes caps it by size.
const (
	DefaultReadBatchRows  = 8192
	DefaultReadBatchBytes = 4 << 20
)

// ReadOptions tune reading. A nil *ReadOptions means the defaults.
type ReadOptions struct {
	// BatchRows is the number of rows per record batch (default 8,192,
	// or fewer where 8,192 rows hold more than DefaultReadBatchBytes of
	// data before compression, by the footer's sizes: 2,048 trajectories
	// of 2,048 tokens would otherwise be decoded at once). Memory held by
	// a reader is about one batch plus one buffer per column, whatever the
	// file size.
	BatchRows int
	// Parallel decodes the columns of a batch concurrently. Leave it off
	// for files from untrusted sources: a corrupt file can make the Parquet
	// library panic in a goroutine this package cannot guard.
	Parallel bool
	// RowGroups restricts reading to these row groups (nil: all), so that
	// callers can split a file among workers.
	RowGroups []int
	// Columns, when set, restricts a Reader to these columns of its
	// table: the others are not decoded, and read as nulls in Records and
	// as zero values in Rows. The file must still hold every column (the
	// schema is checked whole); a name that is not a column of the table
	// is an error. File ignores it.
	Columns []string
}

func (o *ReadOptions) withDefaults() ReadOptions {
	v := artifacts.ValueOf(o)
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
func OpenFile(r io.ReaderAt, size int64, name string, opts *ReadOptions) (*File, error) {
	return openFile(r, size, name, "", opts)
}

// openFile opens a file; table, when not "", names the table expected, for
// messages.
func openFile(r io.ReaderAt, size int64, name, table string, opts *ReadOptions) (f *File, err error) {
	what := "read"
	if table != "" {
		what += " " + table
	}
	what += fmt.Sprintf(" file %q", name)
	defer recoverCorrupt(name, &err)
	if err := checkMagic(r, size); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", what, ErrNotParquet, err)
	}
	o := opts.withDefaults()
	mem := memory.NewGoAllocator()
	props := parquet.NewReaderProperties(mem)
	// Stream column chunks through a bounded buffer rather than reading a
	// whole chunk at once: memory stays bounded, and a corrupt chunk length
	// cannot make the reader allocate it.
	props.BufferedStreamEnabled = true
	props.BufferSize = 1 << 20
	md, err := readFooter(r, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", what, ErrNotParquet, err)
	}
	pf, err := file.NewParquetReader(io.NewSectionReader(r, 0, size), file.WithReadProps(props), file.WithMetadata(md))
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", what, ErrNotParquet, err)
	}
	if err := checkChunks(pf, size); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", what, ErrNotParquet, err)
	}
	// Builders are sized for a whole batch: a file of fewer rows than the
	// default batch gets batches of its size, a file of large rows
	// batches of about DefaultReadBatchBytes.
	batch := int64(o.BatchRows)
	if opts == nil || opts.BatchRows <= 0 {
		batch = max(min(batch, pf.NumRows(), rowsIn(pf.MetaData(), DefaultReadBatchBytes)), 1)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: batch, Parallel: o.Parallel}, mem)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", what, ErrNotParquet, err)
	}
	sc, err := fr.Schema()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", what, ErrNotParquet, err)
	}
	for _, rg := range o.RowGroups {
		if rg < 0 || rg >= pf.NumRowGroups() {
			return nil, fmt.Errorf("%s: row group %d out of range [0, %d): %w", what, rg, pf.NumRowGroups(), errInvalid)
		}
	}
	if sc.Metadata().Len() == 0 {
		var keys, vals []string
		for _, kv := range pf.MetaData().KeyValueMetadata() {
			if kv.Key != arrowSchemaKey && kv.Value != nil {
				keys, vals = append(keys, kv.Key), append(vals, *kv.Value)
			}
		}
		md := arrow.NewMetadata(keys, vals)
		sc = arrow.NewSchema(sc.Fields(), &md)
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

// rowsIn is how many rows of the file hold about n bytes of data before
// compression, by the row groups' sizes in the footer (all of them when
// the footer gives no size).
func rowsIn(md *metadata.FileMetaData, n int64) int64 {
	var size int64
	for g := 0; g < md.NumRowGroups(); g++ {
		size += max(md.RowGroup(g).TotalByteSize(), 0)
	}
	rows := md.NumRows
	if size <= 0 || rows <= 0 || size <= n {
		return max(rows, 1)
	}
	return max(int64(float64(n)/float64(size)*float64(rows)), 1)
}

// checkMagic tells a file that is not Parquet from one that was cut short.
func checkMagic(r io.ReaderAt, size int64) error {
	var head, tail [4]byte
	if size < 4 {
		return fmt.Errorf("%d bytes is too short for parquet", max(size, 0))
	}
	if _, err := r.ReadAt(head[:], 0); err != nil {
		return err
	}
	if string(head[:]) != "PAR1" {
		return fmt.Errorf("no PAR1 magic at the start: not a parquet file")
	}
	if size < 12 {
		return fmt.Errorf("%d bytes is too short for parquet: truncated", size)
	}
	if _, err := r.ReadAt(tail[:], size-4); err != nil {
		return err
	}
	if string(tail[:]) != "PAR1" {
		return fmt.Errorf("no PAR1 magic at the end: truncated, or still being written")
	}
	return nil
}

// checkChunks checks that every column chunk the footer describes lies
// inside the file. The Parquet library trusts these numbers, and some of
// its reads run in goroutines where a panic cannot be recovered.
func checkChunks(pf *file.Reader, size int64) error {
	md := pf.MetaData()
	for g := 0; g < md.NumRowGroups(); g++ {
		rg := md.RowGroup(g)
		if rg.NumRows() < 0 {
			return fmt.Errorf("row group %d has %d rows", g, rg.NumRows())
		}
		if rg.NumColumns() != md.Schema.NumColumns() {
			return fmt.Errorf("row group %d has %d columns, the schema %d", g, rg.NumColumns(), md.Schema.NumColumns())
		}
		for c := 0; c < rg.NumColumns(); c++ {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				return fmt.Errorf("row group %d column %d: %v", g, c, err)
			}
			start := cc.DataPageOffset()
			if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && start > cc.DictionaryPageOffset() {
				start = cc.DictionaryPageOffset()
			}
			n := cc.TotalCompressedSize()
			if start < 4 || n < 0 || start > size || n > size-start || cc.NumValues() < 0 {
				return fmt.Errorf("row group %d column %d: chunk at %d of %d bytes lies outside the %d-byte file", g, c, start, n, size)
			}
		}
	}
	return nil
}

// readFooter parses the file's footer. The Arrow schema some writers
// store in the key-value metadata (ARROW:schema) is hidden from the Arrow
// library by renaming its key: decoding a corrupt one can make that library
// allocate without bound, which no recover catches. Schemas therefore come
// from the Parquet schema alone; the key stays readable under
// arrowSchemaKey.
func readFooter(r io.ReaderAt, size int64) (*metadata.FileMetaData, error) {
	var tail [8]byte
	if _, err := r.ReadAt(tail[:], size-8); err != nil {
		return nil, err
	}
	n := int64(binary.LittleEndian.Uint32(tail[:4]))
	if n <= 0 || n > size-12 {
		return nil, fmt.Errorf("footer length %d does not fit the %d-byte file", n, size)
	}
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, size-8-n); err != nil {
		return nil, err
	}
	// Thrift compact encoding: the key is its length (12) then its bytes.
	buf = bytes.ReplaceAll(buf, []byte("\x0c"+arrowSchemaKeyStored), []byte("\x0c"+arrowSchemaKey))
	md, err := metadata.NewFileMetaData(buf, nil)
	if err != nil {
		return nil, err
	}
	if md.IsSetEncryptionAlgorithm() {
		return nil, errors.New("encrypted parquet files are not supported")
	}
	md.SetSourceFileSize(size)
	return md, nil
}

const (
	arrowSchemaKeyStored = "ARROW:schema"
	// arrowSchemaKey is the same length as arrowSchemaKeyStored, so the
	// footer stays well formed after the rename.
	arrowSchemaKey = "ARROW:schem_"
)

// recoverCorrupt turns a panic of the Parquet library on corrupt input
// into an error.
func recoverCorrupt(name string, err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("read %q: %w: corrupt data (%v)", name, ErrNotParquet, p)
	}
}

// Name returns the name the file was opened with.
func (f *File) Name() string { return f.name }

// ParquetMetadata is the file's footer, parsed with the stored Arrow
// schema hidden (see readFooter): for readers that project columns
// themselves over the same bytes.
func (f *File) ParquetMetadata() *metadata.FileMetaData { return f.pf.MetaData() }

// Schema returns the file's Arrow schema, derived from its Parquet schema
// (a stored ARROW:schema is not used), with the file's key-value metadata.
func (f *File) Schema() *arrow.Schema { return f.schema }

// NumRows returns the number of rows in the file.
func (f *File) NumRows() int64 { return f.pf.NumRows() }

// NumRowGroups returns the number of row groups.
func (f *File) NumRowGroups() int { return f.pf.NumRowGroups() }

// Metadata returns the value of a Parquet key-value metadata entry.
func (f *File) Metadata(key string) (string, bool) {
	if key == arrowSchemaKeyStored {
		key = arrowSchemaKey
	}
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
			// Corrupt pages can decode into inconsistent arrays (offsets
			// past the data); refuse them before anyone indexes into them.
			if err := array.ValidateRecordFull(rr.RecordBatch()); err != nil {
				yield(nil, fmt.Errorf("read %q: %w: corrupt data (%v)", f.name, ErrNotParquet, err))
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
	// skip[i] is set for a table column left out by
	// ReadOptions.Columns: Rows leaves it zero.
	skip []bool
	// base is the file row of the first row read, when reading starts
	// past the first row group (Read's runs), for errors naming a row.
	base int64
}

// NewReader opens the file held by r (size bytes) as a file of table t.
// name identifies the file in errors. The file must hold every column of
// the table with a compatible type (see the package documentation);
// extra columns are ignored. For the rewards table the r_<component>
// columns found in the file become the components (see Reader.Table).
func NewReader[T any](r io.ReaderAt, size int64, name string, t *Table[T], opts *ReadOptions) (*Reader[T], error) {
	f, err := openFile(r, size, name, t.name, opts)
	if err != nil {
		return nil, err
	}
	def, idx, err := match(f, t)
	if err != nil {
		return nil, err
	}
	rd := &Reader[T]{f: f, t: def.(*Table[T]), idx: idx, skip: make([]bool, len(idx))}
	if cols := f.opts.Columns; cols != nil {
		if idx, err = project(rd.t, idx, cols); err != nil {
			return nil, fmt.Errorf("read %s file %q: %w", t.name, name, err)
		}
		for i := range idx {
			rd.skip[i] = idx[i] < 0 && rd.idx[i] >= 0
		}
		rd.idx = idx
	}
	rd.order, rd.pos = readOrder(idx)
	return rd, nil
}

// project returns idx with the table columns not named in cols marked
// as not read (-1).
func project[T any](t *Table[T], idx []int, cols []string) ([]int, error) {
	want := make(map[string]bool, len(cols))
	for _, c := range cols {
		want[c] = true
	}
	out := make([]int, len(idx))
	for i, c := range t.cols {
		out[i] = -1
		if want[c.field.Name] {
			out[i] = idx[i]
			delete(want, c.field.Name)
		}
	}
	for _, c := range cols {
		if want[c] {
			return nil, fmt.Errorf("%w: ReadOptions.Columns names %q, which is not a column of the %s table", errInvalid, c, t.name)
		}
	}
	return out, nil
}

// readOrder sorts the file field indices and gives each table column its
// position among them.
func readOrder(idx []int) (order, pos []int) {
	inFile := make([]int, 0, len(idx))
	for _, fi := range idx {
		if fi >= 0 {
			inFile = append(inFile, fi)
		}
	}
	for i := 1; i < len(inFile); i++ {
		for j := i; j > 0 && inFile[j] < inFile[j-1]; j-- {
			inFile[j], inFile[j-1] = inFile[j-1], inFile[j]
		}
	}
	pos = make([]int, len(idx))
	for i, fi := range idx {
		pos[i] = -1 // not in the file
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
		row := r.base
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
		if r.pos[i] < 0 {
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, c.field.Type, int(rec.NumRows()))
			continue
		}
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
				if r.skip[i] {
					decs[i] = nil
					continue
				}
				decs[i] = c.dec(rec.Column(i))
			}
			n := int(rec.NumRows())
			// One row for the batch, reset per row: the decoders take
			// its address, which would put a fresh one on the heap per row.
			row := new(T)
			for i := 0; i < n; i++ {
				*row = zero
				for _, d := range decs {
					if d != nil {
						d(i, row)
					}
				}
				if !yield(*row, nil) {
					return
				}
			}
		}
	}
}

// Read reads every row of a file of table t. A file of several row
// groups is decoded on every core: its row groups are split into
// contiguous runs of about the same number of rows, each read by a
// Reader of its own on its own goroutine (a panic of the Parquet library
// there is the same error as on one goroutine), and the rows are
// returned in file order. An error is the one a single reader would have
// met first.
func Read[T any](r io.ReaderAt, size int64, name string, t *Table[T]) ([]T, error) {
	rd, err := NewReader(r, size, name, t, nil)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	runs := splitRowGroups(rd.f.pf.MetaData(), runtime.GOMAXPROCS(0))
	if len(runs) < 2 {
		return readAll(context.Background(), rd, rd.NumRows())
	}
	parts := make([][]T, len(runs))
	errs := make([]error, len(runs))
	ctxs := make([]context.Context, len(runs))
	cancels := make([]context.CancelFunc, len(runs))
	for i := range runs {
		ctxs[i], cancels[i] = context.WithCancel(context.Background())
		defer cancels[i]()
	}
	var wg sync.WaitGroup
	for i, run := range runs {
		wg.Go(func() {
			defer recoverCorrupt(name, &errs[i])
			sub, err := NewReader(r, size, name, t, &ReadOptions{RowGroups: run.groups})
			if err == nil {
				sub.base = run.first
				parts[i], err = readAll(ctxs[i], sub, run.rows)
			}
			if errs[i] = err; err != nil {
				// The runs after it need not finish; those before it
				// must, in case one meets an error earlier in the file.
				for _, cancel := range cancels[i+1:] {
					cancel()
				}
			}
		})
	}
	wg.Wait()
	n := 0
	for i, part := range parts {
		if errs[i] != nil {
			return nil, errs[i]
		}
		n += len(part)
	}
	out := make([]T, 0, n)
	for _, part := range parts {
		out = append(out, part...)
	}
	return out, nil
}

// readAll reads every row of rd, of which it expects about n.
func readAll[T any](ctx context.Context, rd *Reader[T], n int64) ([]T, error) {
	out := make([]T, 0, min(n, 1<<16))
	for row, err := range rd.Rows(ctx) {
		if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, nil
}

// rowRun is a contiguous run of row groups: their indexes, the file row
// of the first one's first row, and their rows.
type rowRun struct {
	groups      []int
	first, rows int64
}

// splitRowGroups splits a file's row groups into at most n contiguous
// runs of about the same number of rows.
func splitRowGroups(md *metadata.FileMetaData, n int) []rowRun {
	groups := md.NumRowGroups()
	n = min(n, groups)
	if n < 2 {
		return nil
	}
	total := md.NumRows
	var runs []rowRun
	var cur rowRun
	var done int64
	for g := range groups {
		rows := md.RowGroup(g).NumRows()
		if len(cur.groups) > 0 && len(runs) < n-1 && done >= total*int64(len(runs)+1)/int64(n) {
			runs = append(runs, cur)
			cur = rowRun{first: done}
		}
		cur.groups = append(cur.groups, g)
		cur.rows += rows
		done += rows
	}
	return append(runs, cur)
}

// CheckFile reports whether the file at path is a valid table t: it opens
// the file and checks its schema, as NewReader does, without reading rows.
func CheckFile[T any](path string, t *Table[T]) error {
	f, size, name, err := openLocal(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rd, err := NewReader(f, size, name, t, nil)
	if err != nil {
		return err
	}
	return rd.Close()
}
