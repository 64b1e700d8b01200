package tables

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/internal/heappeak"
)

// TestLargeTableStreams writes and reads back a trajectories table of
// 64 MiB (4,096 completions of 16 KiB) and bounds the heap the writer
// and the reader hold, measured after a collection at eight points of
// each: a quarter of the table beside the zstd encoders the Parquet
// library keeps in a pool whatever the file's size (one or two, of an
// 8 MiB window each, as the pool and the collections fall). A writer or
// reader that kept the table, or a batch of it sized by rows alone
// (4,096 rows are all of it), fails. The writer's row groups and batches
// are made small so that the bound holds; the reader's batches are the
// defaults'. The text repeats so that zstd and the race detector make
// short work of it; bench/prodsize measures the defaults on a
// production-size table of token ids and logprobs.
func TestLargeTableStreams(t *testing.T) {
	const rows, width = 4096, 16 << 10
	const table = rows * width
	const encoders = 2 * 8 << 20
	const bound = encoders + table/4
	path := filepath.Join(t.TempDir(), "trajectories.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	text := strings.Repeat("the answer is 42; ", width/18+1)[:width-8]
	check := func(what string, i int, base uint64) {
		t.Helper()
		if i%(rows/8) != rows/8-1 {
			return
		}
		if held := int64(heappeak.Live()) - int64(base); held > bound {
			t.Fatalf("%s row %d of %d: %d bytes of heap held, want at most %d (the zstd encoders' %d and a quarter of the table's %d)", what, i, rows, held, bound, encoders, table)
		}
	}

	base := heappeak.Live()
	w, err := NewWriter(f, Trajectories, &WriteOptions{RowGroupBytes: 4 << 20, BatchBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < rows; i++ {
		c := strconv.Itoa(100000000 + i)[1:] + text
		if err := w.Write(Trajectory{PromptID: "p", GroupID: "g", Completion: c, Status: StatusOK}); err != nil {
			t.Fatal(err)
		}
		check("write", i, base)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}

	base = heappeak.Live()
	rd, err := NewReader(f, st.Size(), "trajectories.parquet", Trajectories, nil)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for row, err := range rd.Rows(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if want := strconv.Itoa(100000000 + i)[1:]; len(row.Completion) != width || row.Completion[:8] != want {
			t.Fatalf("row %d: completion of %d bytes starting %q, want %d starting %q", i, len(row.Completion), row.Completion[:8], width, want)
		}
		check("read", i, base)
		i++
	}
	if i != rows {
		t.Fatalf("read %d rows, wrote %d", i, rows)
	}
}

// TestLargeRowsLayout checks where the defaults cut a file of large rows:
// row groups at about 8 MiB of data (DefaultRowGroupBytes) and reader
// batches at about 4 MiB (DefaultReadBatchBytes) by the footer's sizes;
// and that a file of small rows keeps one row group, read in one batch,
// as before these bounds.
func TestLargeRowsLayout(t *testing.T) {
	cases := []struct {
		name        string
		rows, width int
		groups      []int64 // rows of each row group
		batches     []int64 // rows of each batch read
	}{
		{"small rows", 1000, 100, []int64{1000}, []int64{1000}},
		{"256 KiB rows", 80, 256 << 10, []int64{32, 32, 16}, []int64{15, 15, 15, 15, 15, 5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "trajectories.parquet")
			text := strings.Repeat("x", c.width)
			rows := make([]Trajectory, c.rows)
			for i := range rows {
				rows[i] = Trajectory{PromptID: "p", GroupID: "g", Completion: text, Status: StatusOK}
			}
			if err := WriteFile(path, Trajectories, rows, nil); err != nil {
				t.Fatal(err)
			}
			f, size, name, err := openLocal(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			rd, err := NewReader(f, size, name, Trajectories, nil)
			if err != nil {
				t.Fatal(err)
			}
			md := rd.File().ParquetMetadata()
			var groups, batches []int64
			for g := 0; g < md.NumRowGroups(); g++ {
				groups = append(groups, md.RowGroup(g).NumRows())
			}
			for rec, err := range rd.Records(context.Background()) {
				if err != nil {
					t.Fatal(err)
				}
				batches = append(batches, rec.NumRows())
			}
			if !slices.Equal(groups, c.groups) || !slices.Equal(batches, c.batches) {
				t.Errorf("row groups of %v rows and batches read of %v, want %v and %v", groups, batches, c.groups, c.batches)
			}
		})
	}
}
