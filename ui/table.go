package ui

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// inMemoryLimit is the largest table read into memory whole; a larger one
// is read in ranges when the store can, so a page of rows does not fetch
// the whole file.
const inMemoryLimit = 64 << 20

// maxCellRunes bounds a text cell in a page; longer text is cut and the
// page says so (`rlpipe cat` or `rlpipe export` give the whole value).
const maxCellRunes = 4000

// maxSafeInt is the largest integer a JavaScript number holds exactly;
// larger ones are sent as strings.
const maxSafeInt = 1<<53 - 1

// Column is a column of a table page: its Arrow type in full, and Short,
// one line for the header (a list of structs is "list<struct, 4 fields>",
// not the fields' names and types over ten lines).
type Column struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Short string `json:"short"`
}

// shortType names a type on one line: nested types by their shape, the
// fields counted rather than listed.
func shortType(dt arrow.DataType) string {
	switch t := dt.(type) {
	case *arrow.ListType:
		return "list<" + shortType(t.Elem()) + ">"
	case *arrow.LargeListType:
		return "large_list<" + shortType(t.Elem()) + ">"
	case *arrow.FixedSizeListType:
		return fmt.Sprintf("fixed_size_list<%s, %d>", shortType(t.Elem()), t.Len())
	case *arrow.MapType:
		return "map<" + shortType(t.KeyType()) + ", " + shortType(t.ItemType()) + ">"
	case *arrow.StructType:
		if t.NumFields() == 1 {
			return "struct, 1 field"
		}
		return fmt.Sprintf("struct, %d fields", t.NumFields())
	}
	return dt.String()
}

// TablePage is /api/table: a window of rows of a Parquet file.
type TablePage struct {
	Ref       string   `json:"ref"`
	Path      string   `json:"path"`
	Table     string   `json:"table,omitempty"` // "trajectories v1" for rlpipe tables
	NumRows   int64    `json:"num_rows"`
	Offset    int      `json:"offset"`
	Limit     int      `json:"limit"`
	Columns   []Column `json:"columns"`
	Rows      [][]any  `json:"rows"` // cells in column order
	Truncated bool     `json:"truncated_cells,omitempty"`
}

// readTablePage reads rows [offset, offset+limit) of the Parquet object
// ref:path, decoding only the row groups that hold them.
func readTablePage(ctx context.Context, st artifacts.Store, ref, path string, offset, limit int) (*TablePage, error) {
	ra, size, err := openObject(ctx, st, ref, path)
	if err != nil {
		return nil, err
	}
	name := ref + ":" + path
	f, err := tables.OpenFile(ra, size, name, nil)
	if err != nil {
		return nil, fmt.Errorf("open %s as a table: %w", name, err)
	}
	page := &TablePage{Ref: ref, Path: path, Table: tableName(f), NumRows: f.NumRows(), Offset: offset, Limit: limit, Rows: [][]any{}}
	for _, fl := range f.Schema().Fields() {
		page.Columns = append(page.Columns, Column{Name: fl.Name, Type: fl.Type.String(), Short: shortType(fl.Type)})
	}
	if int64(offset) >= f.NumRows() {
		return page, nil
	}
	groups, skip := rowGroupsFor(f.ParquetMetadata(), offset, limit)
	f, err = tables.OpenFile(ra, size, name, &tables.ReadOptions{RowGroups: groups, BatchRows: min(limit+int(skip), tables.DefaultReadBatchRows)})
	if err != nil {
		return nil, fmt.Errorf("open %s as a table: %w", name, err)
	}
	for rec, err := range f.Records(ctx) {
		if err != nil {
			return nil, err
		}
		n := rec.NumRows()
		if skip >= n {
			skip -= n
			continue
		}
		for i := int(skip); i < int(n) && len(page.Rows) < limit; i++ {
			row := make([]any, rec.NumCols())
			for j, col := range rec.Columns() {
				row[j] = cell(tables.Value(col, i), &page.Truncated)
			}
			page.Rows = append(page.Rows, row)
		}
		skip = 0
		if len(page.Rows) >= limit {
			break
		}
	}
	return page, nil
}

// openObject reads an object for a table reader: whole into memory when
// small, in ranges where the store reads them; a large object on a store
// that cannot is an error that says what to use instead.
func openObject(ctx context.Context, st artifacts.Store, ref, path string) (io.ReaderAt, int64, error) {
	info, err := st.StatObject(ctx, ref, path)
	if err != nil {
		return nil, 0, readErr(err, ref, path)
	}
	rr, ranged := st.(artifacts.RangeReader)
	switch {
	case info.Size <= inMemoryLimit:
		b, err := readAll(ctx, st, ref, path)
		if err != nil {
			return nil, 0, err
		}
		return bytes.NewReader(b), int64(len(b)), nil
	case ranged:
		return artifacts.RangeReaderAt(ctx, rr, ref, path), info.Size, nil
	}
	return nil, 0, kindf(artifacts.ErrInvalid, "%s:%s is %d MiB, too large to browse on this store; use `rlpipe cat -n 100 %s:%s`",
		ref, path, info.Size>>20, ref, path)
}

// rowGroupsFor picks the row groups that hold rows [offset,
// offset+limit), and the rows to skip in the first of them.
func rowGroupsFor(md *metadata.FileMetaData, offset, limit int) (groups []int, skip int64) {
	skip, first := int64(offset), int64(-1)
	var start int64
	for g := 0; g < md.NumRowGroups(); g++ {
		n := md.RowGroup(g).NumRows()
		if start+n > int64(offset) && start < int64(offset+limit) {
			if first < 0 {
				first = start
			}
			groups = append(groups, g)
		}
		start += n
	}
	if first >= 0 {
		skip = int64(offset) - first
	}
	return groups, skip
}

// cell makes a table value fit JSON and a browser: NaN and infinities as
// text, integers beyond 2^53 as text, bytes as text or hex, long text cut.
func cell(v any, truncated *bool) any {
	switch v := v.(type) {
	case float64:
		return finite(v)
	case float32:
		return finite(float64(v))
	case int64:
		if v > maxSafeInt || v < -maxSafeInt {
			return strconv.FormatInt(v, 10)
		}
		return v
	case uint64:
		if v > maxSafeInt {
			return strconv.FormatUint(v, 10)
		}
		return v
	case string:
		return cut(v, truncated)
	case []byte:
		if utf8.Valid(v) {
			return cut(string(v), truncated)
		}
		if len(v) > maxCellRunes/2 {
			*truncated = true
			return "0x" + hex.EncodeToString(v[:maxCellRunes/2]) + "…"
		}
		return "0x" + hex.EncodeToString(v)
	case time.Time:
		return v.Format(time.RFC3339Nano)
	case []any:
		for i := range v {
			v[i] = cell(v[i], truncated)
		}
		return v
	case map[string]any:
		for k := range v {
			v[k] = cell(v[k], truncated)
		}
		return v
	}
	return v
}

func finite(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return f
}

func cut(s string, truncated *bool) string {
	if len(s) <= maxCellRunes {
		return s
	}
	n := 0
	for i := range s {
		if n == maxCellRunes {
			*truncated = true
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// readAll reads a whole object, verified against its digest.
func readAll(ctx context.Context, st artifacts.Store, ref, path string) ([]byte, error) {
	rc, _, err := st.GetObject(ctx, ref, path)
	if err != nil {
		return nil, readErr(err, ref, path)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("read %s:%s: %w", ref, path, err)
	}
	return b, nil
}
