package tables

import (
	"bytes"
	"errors"
	"io"
	"testing"

	pq "github.com/parquet-go/parquet-go"
)

// Files must open in other Parquet implementations unchanged. parquet-go
// shares no code with arrow-go, so it stands in for DuckDB, pandas and
// polars here: standard logical types, three-level lists, readable pages.

// pgStrings reads a top-level string column page by page with parquet-go,
// calling fn with each value. It is the cheapest way to read those bytes.
func pgStrings(r io.ReaderAt, size int64, column string, fn func(string)) error {
	f, err := pq.OpenFile(r, size, pq.SkipPageIndex(true), pq.SkipBloomFilters(true))
	if err != nil {
		return err
	}
	leaf, ok := f.Schema().Lookup(column)
	if !ok {
		return errors.New("no column " + column)
	}
	for _, rg := range f.RowGroups() {
		pages := rg.ColumnChunks()[leaf.ColumnIndex].Pages()
		for {
			p, err := pages.ReadPage()
			if err == io.EOF {
				break
			}
			if err != nil {
				pages.Close()
				return err
			}
			if p.Dictionary() != nil {
				// Dictionary-encoded page: resolve through the value reader.
				vals := make([]pq.Value, p.NumValues())
				n, _ := p.Values().ReadValues(vals)
				for _, v := range vals[:n] {
					fn(v.String())
				}
			} else {
				vals := p.Data()
				data, offsets := vals.ByteArray()
				for i := 0; i+1 < len(offsets); i++ {
					fn(string(data[offsets[i]:offsets[i+1]]))
				}
			}
			pq.Release(p)
		}
		pages.Close()
	}
	return nil
}

func TestParquetGoReadsOurFiles(t *testing.T) {
	rows := []Trajectory{
		{PromptID: "p1", SampleIndex: 0, Completion: "première", Turns: []Turn{{Role: "user", Content: "q", ToolCalls: ptr("[]")}},
			TokenIDs: []int32{1, 2, 3}, Logprobs: []float32{-1}, Status: StatusOK},
		{PromptID: "p1", SampleIndex: 1, Completion: "", Status: StatusTimeout, Error: ptr("slow")},
		{PromptID: "p2", SampleIndex: 0, Completion: "🤖 third", TokenIDs: []int32{}, Status: StatusOK},
	}
	data := writeRows(t, Trajectories, rows, &WriteOptions{RowGroupRows: 2})
	f, err := pq.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("parquet-go cannot open our file: %v", err)
	}
	if v, ok := f.Lookup(MetaTable); !ok || v != TrajectoriesName {
		t.Errorf("parquet-go sees %s = %q", MetaTable, v)
	}
	if v, ok := f.Lookup(MetaSchemaVersion); !ok || v != "4" {
		t.Errorf("parquet-go sees %s = %q", MetaSchemaVersion, v)
	}
	if n := f.NumRows(); n != 3 {
		t.Errorf("parquet-go counts %d rows", n)
	}
	if n := len(f.RowGroups()); n != 2 {
		t.Errorf("parquet-go counts %d row groups", n)
	}
	fields := map[string]pq.Field{}
	for _, fl := range f.Schema().Fields() {
		fields[fl.Name()] = fl
	}
	for _, name := range []string{"prompt_id", "completion", "status", "error"} {
		if lt := fields[name].Type().LogicalType(); lt == nil || lt.String() != "STRING" {
			t.Errorf("column %s: logical type %v, want STRING", name, lt)
		}
	}
	if fields["error"].Required() || !fields["prompt_id"].Required() {
		t.Error("nullability not kept: error must be optional, prompt_id required")
	}
	for _, name := range []string{"turns", "token_ids", "logprobs"} {
		fl := fields[name]
		if lt := fl.Type().LogicalType(); lt == nil || lt.String() != "LIST" {
			t.Errorf("column %s: logical type %v, want LIST", name, lt)
			continue
		}
		// Standard three-level list: <name> (LIST) { repeated group list { element } }.
		if len(fl.Fields()) != 1 || fl.Fields()[0].Name() != "list" || !fl.Fields()[0].Repeated() ||
			len(fl.Fields()[0].Fields()) != 1 || fl.Fields()[0].Fields()[0].Name() != "element" {
			t.Errorf("column %s is not a standard three-level list", name)
		}
	}
	var got []string
	if err := pgStrings(bytes.NewReader(data), int64(len(data)), "completion", func(s string) { got = append(got, s) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != "première" || got[1] != "" || got[2] != "🤖 third" {
		t.Errorf("parquet-go read completions %q", got)
	}
	var status []string
	if err := pgStrings(bytes.NewReader(data), int64(len(data)), "status", func(s string) { status = append(status, s) }); err != nil {
		t.Fatal(err)
	}
	if len(status) != 3 || status[1] != StatusTimeout {
		t.Errorf("parquet-go read statuses %q", status)
	}
	// Whole rows, nested columns included, through parquet-go's row reader.
	rr := pq.NewReader(f)
	defer rr.Close()
	buf := make([]pq.Row, 10)
	n, err := rr.ReadRows(buf)
	if err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("parquet-go read %d rows", n)
	}
	// Row 0 holds three token ids: count the values of the token_ids leaf.
	tok, _ := f.Schema().Lookup("token_ids", "list", "element")
	var ids []int32
	for _, v := range buf[0] {
		if v.Column() == tok.ColumnIndex && !v.IsNull() {
			ids = append(ids, v.Int32())
		}
	}
	if len(ids) != 3 || ids[2] != 3 {
		t.Errorf("parquet-go read token_ids %v from row 0", ids)
	}
}
