package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// inMemoryLimit is the largest object read into memory whole to check it
// before use; larger ones are spooled to a temporary file.
const inMemoryLimit = 32 << 20

// storedTable is a Parquet file in the store, opened for reading.
type storedTable struct {
	*tables.File
	close func()
}

// openStoredTable opens the Parquet object at a from bytes the store has
// verified (see spoolObject): a damaged table fails here, before a row is
// printed or exported.
func openStoredTable(ctx context.Context, st artifacts.Store, a artifactArg) (*storedTable, error) {
	sp, err := spoolObject(ctx, st, a, "read")
	if err != nil {
		return nil, err
	}
	tf, err := tables.OpenFile(sp.ra, sp.size, a.String(), nil)
	if err != nil {
		sp.close()
		return nil, failure(withOp(err, "read %s", a))
	}
	return &storedTable{File: tf, close: sp.close}, nil
}

// writeVerified writes the object at a to w once the store has checked
// all of it (see spoolObject): w gets the whole object or not a byte.
func writeVerified(ctx context.Context, st artifacts.Store, a artifactArg, w io.Writer, verb string) (int64, error) {
	sp, err := spoolObject(ctx, st, a, verb)
	if err != nil {
		return 0, err
	}
	defer sp.close()
	n, err := io.Copy(w, io.NewSectionReader(sp.ra, 0, sp.size))
	if err != nil {
		return n, withOp(err, "%s %s", verb, a)
	}
	return n, nil
}

// spooled is an object's bytes, read to their end (where the store
// checks them) and kept for reading again.
type spooled struct {
	ra    io.ReaderAt
	size  int64
	close func() // removes the temporary file, if any
}

// spoolObject reads the object at a whole, in memory up to inMemoryLimit
// (by its stat size) and in a temporary file past it, and returns its
// bytes only once the store has checked them: the embedded store checks a
// blob before its first byte, the lakeFS backend as the last is read, so
// a caller that writes only spooled bytes never writes a byte of a
// damaged object. The temporary file is removed on failure and by close.
// An error names verb ("read", "cat") and the object.
func spoolObject(ctx context.Context, st artifacts.Store, a artifactArg, verb string) (spooled, error) {
	info, err := st.StatObject(ctx, a.ref, a.path)
	if err != nil {
		return spooled{}, withOp(err, "%s %s", verb, a)
	}
	if info.Size <= inMemoryLimit {
		var buf bytes.Buffer
		if _, err := copyObject(ctx, st, a, &buf, verb); err != nil {
			return spooled{}, err
		}
		return spooled{ra: bytes.NewReader(buf.Bytes()), size: int64(buf.Len()), close: func() {}}, nil
	}
	f, err := os.CreateTemp("", "rlpipe-object-*")
	if err != nil {
		return spooled{}, withOp(err, "%s %s: make a temporary file to check it in (set TMPDIR to a folder with room for %s)", verb, a, humanBytes(info.Size))
	}
	cleanup := func() { f.Close(); os.Remove(f.Name()) }
	n, err := copyObject(ctx, st, a, f, verb)
	if err != nil {
		cleanup()
		return spooled{}, err
	}
	return spooled{ra: f, size: n, close: cleanup}, nil
}

func (t *storedTable) Close() error {
	t.close()
	return t.File.Close()
}

// maxCellWidth bounds a cell of a printed table; longer values end in "…".
const maxCellWidth = 60

// widthRows is how many rows fix the column widths of a printed table;
// later rows reuse them, so that printing a large table streams.
const widthRows = 1000

// writeTableText prints up to limit rows (0: all) of a Parquet file as an
// aligned table with a header, and a footer counting the rows.
func writeTableText(ctx context.Context, w io.Writer, f *tables.File, limit int) error {
	fields := f.Schema().Fields()
	t := newTable()
	header := make([]string, len(fields))
	for i, fl := range fields {
		header[i] = fl.Name
		t.right = append(t.right, isNumeric(fl.Type))
	}
	t.header = header
	var (
		shown   int
		flushed bool
		widths  []int
	)
	flush := func() error {
		if !flushed {
			widths = t.widths()
			flushed = true
		}
		err := t.writeWidths(w, widths)
		t.header, t.rows = nil, t.rows[:0]
		return err
	}
	for row, err := range rowsOf(ctx, f, limit) {
		if err != nil {
			return err
		}
		cells := make([]string, len(row))
		for i, v := range row {
			cells[i] = cellText(v)
		}
		t.add(cells...)
		shown++
		if len(t.rows) == widthRows {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	total := f.NumRows()
	if int64(shown) < total {
		_, err := fmt.Fprintf(w, "(%d of %d rows)\n", shown, total)
		return err
	}
	_, err := fmt.Fprintf(w, "(%s)\n", plural(int(total), "row"))
	return err
}

// writeTableJSON prints up to limit rows (0: all) as a JSON array of
// objects, one row per line, keys in column order.
func writeTableJSON(ctx context.Context, w io.Writer, f *tables.File, limit int) error {
	fields := f.Schema().Fields()
	keys := make([][]byte, len(fields))
	for i, fl := range fields {
		k, err := json.Marshal(fl.Name)
		if err != nil {
			return fmt.Errorf("encode %s column name %q: %w", f.Name(), fl.Name, err)
		}
		keys[i] = k
	}
	var b bytes.Buffer
	b.WriteString("[")
	n := 0
	for row, err := range rowsOf(ctx, f, limit) {
		if err != nil {
			return err
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n  {")
		for i, v := range row {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(keys[i])
			b.WriteByte(':')
			enc, err := json.Marshal(jsonSafe(v))
			if err != nil {
				return fmt.Errorf("encode %s column %s: %w", f.Name(), fields[i].Name, err)
			}
			b.Write(enc)
		}
		b.WriteByte('}')
		n++
		if b.Len() >= 1<<16 {
			if _, err := w.Write(b.Bytes()); err != nil {
				return err
			}
			b.Reset()
		}
	}
	if n > 0 {
		b.WriteByte('\n')
	}
	b.WriteString("]\n")
	_, err := w.Write(b.Bytes())
	return err
}

// rowsOf yields up to limit rows (0: all) as values in column order.
func rowsOf(ctx context.Context, f *tables.File, limit int) func(func([]any, error) bool) {
	return func(yield func([]any, error) bool) {
		n := 0
		for rec, err := range f.Records(ctx) {
			if err != nil {
				yield(nil, failure(err))
				return
			}
			cols := rec.Columns()
			for i := 0; i < int(rec.NumRows()); i++ {
				if limit > 0 && n == limit {
					return
				}
				row := make([]any, len(cols))
				for j, c := range cols {
					row[j] = tables.Value(c, i)
				}
				n++
				if !yield(row, nil) {
					return
				}
			}
		}
	}
}

// jsonSafe replaces what encoding/json cannot hold (NaN, ±Inf) with null.
func jsonSafe(v any) any {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil
		}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonSafe(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonSafe(e)
		}
		return out
	}
	return v
}

// cellText formats a value for a table cell on one line.
func cellText(v any) string {
	var s string
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		s = x
	case bool:
		s = strconv.FormatBool(x)
	case int64:
		s = strconv.FormatInt(x, 10)
	case uint64:
		s = strconv.FormatUint(x, 10)
	case float64:
		s = strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		s = strconv.FormatFloat(float64(x), 'g', -1, 32)
	case time.Time:
		s = x.UTC().Format(time.RFC3339Nano)
	default:
		b, err := json.Marshal(jsonSafe(v))
		if err != nil {
			s = fmt.Sprint(v)
		} else {
			s = string(b)
		}
	}
	s = strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`).Replace(s)
	if utf8.RuneCountInString(s) > maxCellWidth {
		r := []rune(s)
		s = string(r[:maxCellWidth-1]) + "…"
	}
	return s
}

func isNumeric(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64, arrow.DECIMAL128, arrow.DECIMAL256:
		return true
	}
	return false
}

// convertTable writes the object at a to w in format, converting between
// Parquet and JSONL or CSV. The bytes read are verified.
func convertTable(ctx context.Context, st artifacts.Store, a artifactArg, format string, w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	src := formatOf(a.path)
	switch {
	case src == format:
		return copyObject(ctx, st, a, w, "read")
	case src == formatParquet:
		t, err := openStoredTable(ctx, st, a)
		if err != nil {
			return 0, err
		}
		defer t.Close()
		if err := tables.Export(ctx, cw, t.File, tables.Format(format)); err != nil {
			return cw.n, failure(withOp(err, "export %s as %s", a, format))
		}
		return cw.n, nil
	case format == formatParquet && (src == formatJSONL || src == formatCSV):
		rc, _, err := st.GetObject(ctx, a.ref, a.path)
		if err != nil {
			return 0, withOp(err, "read %s", a)
		}
		defer rc.Close()
		if _, err := tables.Import(cw, rc, a.String(), &tables.ImportOptions{Format: tables.Format(src)}); err != nil {
			return cw.n, failure(withOp(err, "export %s as parquet", a))
		}
		return cw.n, nil
	}
	return 0, usagef("export %s: cannot convert %s to %s (convert Parquet to jsonl or csv, or jsonl and csv to parquet)", a, describeFormat(src), format)
}

func describeFormat(f string) string {
	if f == formatRaw {
		return "a file that is not a table"
	}
	return f
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
