package tables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestReadSplitsRowGroups reads a file of 15 row groups with Read, which
// splits them among goroutines, on 1 to 4 of them: the rows are those
// one Reader yields, in the same order.
func TestReadSplitsRowGroups(t *testing.T) {
	var rows []Trajectory
	for i := range 100 {
		rows = append(rows, Trajectory{PromptID: fmt.Sprintf("p%03d", i), SampleIndex: int32(i % 8),
			TokenIDs: []int32{int32(i), int32(i * 3)}, Logprobs: []float32{-float32(i) / 7}, Status: StatusOK})
	}
	data := writeRows(t, Trajectories, rows, &WriteOptions{RowGroupRows: 7})
	rd, err := NewReader(bytes.NewReader(data), int64(len(data)), "t.parquet", Trajectories, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := rd.File().NumRowGroups(); n != 15 {
		t.Fatalf("%d row groups, want 15", n)
	}
	one, err := readAll(context.Background(), rd, rd.NumRows())
	if err != nil || len(one) != len(rows) {
		t.Fatalf("one reader: %d rows, %v", len(one), err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 3, 4} {
		runtime.GOMAXPROCS(procs)
		got, err := Read(bytes.NewReader(data), int64(len(data)), "t.parquet", Trajectories)
		if err != nil {
			t.Fatalf("%d cores: %v", procs, err)
		}
		if !reflect.DeepEqual(got, one) {
			t.Fatalf("%d cores: the rows differ from one reader's", procs)
		}
	}
}

// TestSplitRowGroups checks the runs: contiguous, about even in rows,
// each starting at the file row of its first group.
func TestSplitRowGroups(t *testing.T) {
	data := writeRows(t, Prompts, make([]Prompt, 50), &WriteOptions{RowGroupRows: 4}) // 13 groups: 12 of 4, 1 of 2
	rd, err := NewReader(bytes.NewReader(data), int64(len(data)), "p.parquet", Prompts, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{1, "[]"},
		{2, "[{0-6 0 28} {7-12 28 22}]"},
		{3, "[{0-3 0 16} {4-8 16 20} {9-12 36 14}]"},
		{20, "[{0-0 0 4} {1-1 4 4} {2-2 8 4} {3-3 12 4} {4-4 16 4} {5-5 20 4} {6-6 24 4} {7-7 28 4} {8-8 32 4} {9-9 36 4} {10-10 40 4} {11-11 44 4} {12-12 48 2}]"},
	} {
		var got []string
		for _, r := range splitRowGroups(rd.File().ParquetMetadata(), tc.n) {
			for i, g := range r.groups {
				if g != r.groups[0]+i {
					t.Fatalf("n=%d: run %v is not contiguous", tc.n, r.groups)
				}
			}
			got = append(got, fmt.Sprintf("{%d-%d %d %d}", r.groups[0], r.groups[len(r.groups)-1], r.first, r.rows))
		}
		if s := "[" + strings.Join(got, " ") + "]"; s != tc.want {
			t.Errorf("n=%d: runs %s, want %s", tc.n, s, tc.want)
		}
	}
}

// TestSplitReadNamesTheFileRow reads a file whose required column holds
// a null in its eleventh row group: the error names the row in the file,
// not in the run of row groups that met it.
func TestSplitReadNamesTheFileRow(t *testing.T) {
	fields := replaceField(advantageFields(), "prompt_id", arrow.Field{Name: "prompt_id", Type: arrow.BinaryTypes.String, Nullable: true})
	var js []string
	for i := range 40 {
		row := strings.Trim(advRow, "[]")
		if i == 37 {
			row = strings.Replace(row, `"prompt_id":"p"`, `"prompt_id":null`, 1)
		}
		js = append(js, row)
	}
	data := foreignFileWith(t, fields, nil, "["+strings.Join(js, ",")+"]", &WriteOptions{RowGroupRows: 3})
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	_, err := Read(bytes.NewReader(data), int64(len(data)), "a.parquet", Advantages)
	if !errors.Is(err, ErrSchemaMismatch) || !strings.Contains(err.Error(), `column "prompt_id"`) || !strings.Contains(err.Error(), "null at row 37") {
		t.Fatalf("read a null in a required column: %v", err)
	}
}
