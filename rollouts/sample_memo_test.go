package rollouts

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
)

// TestDatasetMemo reads datasets through one memo, as the calls of one
// sample task do: the same bytes again reuse the rows decoded before, new
// bytes at the same path are decoded (a run on another dataset, or the
// same path rewritten), and a file that is not a prompts table or is
// missing fails permanently, naming the file, with the memo's rows kept
// for the next good file.
func TestDatasetMemo(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "prompts.parquet")
	write := func(ids ...string) {
		t.Helper()
		var rows []tables.Prompt
		for _, id := range ids {
			rows = append(rows, tables.Prompt{PromptID: id, Prompt: id + "=", Answer: "1", Metadata: "{}", Source: "test", Split: "train"})
		}
		if err := tables.WriteFile(path, tables.Prompts, rows, nil); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(rows []tables.Prompt) []string {
		var out []string
		for _, r := range rows {
			out = append(out, r.PromptID)
		}
		return out
	}
	var m datasetMemo
	steps := []struct {
		name    string
		prepare func()
		want    []string
		reused  bool
		wantErr string
	}{
		{name: "first read decodes", prepare: func() { write("a", "b", "c") }, want: []string{"a", "b", "c"}},
		{name: "same bytes reuse the rows", prepare: func() {}, want: []string{"a", "b", "c"}, reused: true},
		{name: "rewritten file is decoded again", prepare: func() { write("d", "e") }, want: []string{"d", "e"}},
		{name: "not a parquet file", prepare: func() {
			if err := os.WriteFile(path, []byte("not parquet"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, wantErr: `dataset: read prompts file "prompts.parquet": not a readable parquet file: no PAR1 magic at the start: not a parquet file`},
		{name: "missing file", prepare: func() {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "dataset: open " + path + ": no such file or directory"},
		{name: "a good file after errors", prepare: func() { write("d", "e") }, want: []string{"d", "e"}, reused: true},
	}
	var prev []tables.Prompt
	for _, s := range steps {
		s.prepare()
		got, err := m.read(path)
		if s.wantErr != "" {
			if err == nil || err.Error() != s.wantErr || !errors.Is(err, pipeline.ErrPermanent) {
				t.Fatalf("%s: error %v, want the permanent %q", s.name, err, s.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if g := ids(got); !slices.Equal(g, s.want) {
			t.Fatalf("%s: rows %v, want %v", s.name, g, s.want)
		}
		if reused := prev != nil && &got[0] == &prev[0]; reused != s.reused {
			t.Errorf("%s: rows reused %v, want %v", s.name, reused, s.reused)
		}
		prev = got
	}
}
