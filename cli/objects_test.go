package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// TestExport checks table conversion on export and exporting a prefix
// into a directory.
func TestExport(t *testing.T) {
	h := newStore(t)
	h.ok("import", h.file("prompts.jsonl", promptsJSONL([2]int{1, 2}, [2]int{3, 4})), "main:data/prompts.parquet")
	h.stdin = "note\n"
	h.ok("put", "-", "main:data/sub/note.txt")

	// The extension picks the format; --format overrides it.
	csv := filepath.Join(h.dir, "out", "prompts.csv")
	h.ok("export", "main:data/prompts.parquet", csv)
	wantFile(t, csv, "prompt_id,prompt,answer\np0001,1+2=,3\np0002,3+4=,7\n")
	if got := h.ok("export", "main:data/prompts.parquet", "-", "--format", "jsonl"); got != promptsJSONL([2]int{1, 2}, [2]int{3, 4}) {
		t.Fatalf("export --format jsonl:\n%s", got)
	}
	// Bytes as stored when no conversion is asked for.
	if got := h.ok("export", "main:data/sub/note.txt", "-"); got != "note\n" {
		t.Fatalf("export note: %q", got)
	}

	// A prefix exports every object below it.
	dir := filepath.Join(h.dir, "exported")
	var out exportOut
	h.json(&out, "export", "main:data", dir)
	var files []string
	for _, f := range out.Files {
		files = append(files, f.Path+" -> "+strings.TrimPrefix(f.File, dir))
	}
	if want := []string{"data/prompts.parquet -> /prompts.parquet", "data/sub/note.txt -> /sub/note.txt"}; !slices.Equal(files, want) {
		t.Fatalf("export main:data DIR: %v, want %v", files, want)
	}
	wantFile(t, filepath.Join(dir, "sub", "note.txt"), "note\n")
	// What was exported imports back unchanged.
	var imp importOut
	h.json(&imp, "import", filepath.Join(dir, "prompts.parquet"), "main:copy/")
	if imp.Path != "copy/prompts.parquet" || imp.Format != "parquet" || imp.Rows == nil || *imp.Rows != 2 {
		t.Fatalf("import exported parquet: %+v", imp)
	}
	h.fails(ExitFailure, []string{"nothing under that prefix"}, "export", "main:nope/", dir)
	h.fails(ExitUsage, []string{"a prefix exports to a directory"}, "export", "main:data/", "-", "--format", "csv")
}

// TestImportChecks checks that a file that is not what it claims is
// refused before anything is staged.
func TestImportChecks(t *testing.T) {
	h := newStore(t)
	bad := h.file("broken.parquet", "PAR1 this is not parquet PAR1")
	h.fails(ExitFailure, []string{"import " + bad, "not a readable parquet file"}, "import", bad, "main:data/x.parquet")
	// A dataset that lacks a required column of the named table.
	h.fails(ExitFailure, []string{`column "metadata"`}, "import", h.file("p.jsonl", promptsJSONL([2]int{1, 1})), "main:data/p.parquet", "--table", "prompts")
	var unc []artifacts.Change
	h.json(&unc, "diff", "main")
	wantChanges(t, "staged after failed imports", unc, []artifacts.Change{})

	// A CSV dataset that fits the prompts table.
	csv := h.file("p.csv", "prompt_id,prompt,answer,metadata,source,split\np1,1+1=,2,{},demo,train\n")
	var imp importOut
	h.json(&imp, "import", csv, "main:data/", "--table", "prompts")
	if imp.Path != "data/p.parquet" || imp.Table != "prompts" || imp.Format != "csv" || *imp.Rows != 1 {
		t.Fatalf("import csv: %+v", imp)
	}
	// The Parquet file now checks against the table it was written as.
	exported := filepath.Join(h.dir, "p.parquet")
	h.ok("export", "main:data/p.parquet", exported)
	h.ok("import", exported, "main:data/again.parquet", "--table", "prompts")
	h.fails(ExitFailure, []string{"trajectories"}, "import", exported, "main:data/t.parquet", "--table", "trajectories")
	// A file that is not a dataset uploads as is.
	var raw importOut
	h.json(&raw, "import", h.file("adapter_config.json", `{"r": 8}`), "main:adapter/")
	if raw.Format != "raw" || raw.Rows != nil || raw.Table != "" || raw.Path != "adapter/adapter_config.json" {
		t.Fatalf("import json config: %+v", raw)
	}
}

// TestImportMixedTypes imports a JSONL file with one string among the
// integers of a column: the import fails naming the file, line, column,
// value and the type seen before, and stages nothing; --string makes the
// column text.
func TestImportMixedTypes(t *testing.T) {
	h := newStore(t)
	src := h.file("scores.jsonl", "{\"id\":\"a\",\"score\":1}\n{\"id\":\"b\",\"score\":2}\n{\"id\":\"c\",\"score\":\"n/a\"}\n")
	h.fails(ExitFailure, []string{
		"import " + src + " line 3 column \"score\": want int64, found \"n/a\": the column holds int64 values from line 1 on",
		"quote its values, or name it a string column: rlpipe import --string score",
	}, "import", src, "main:data/scores.parquet")
	var unc []artifacts.Change
	h.json(&unc, "diff", "main")
	wantChanges(t, "staged after a failed import", unc, []artifacts.Change{})

	var imp importOut
	h.json(&imp, "import", src, "main:data/scores.parquet", "--string", "score")
	if *imp.Rows != 3 {
		t.Fatalf("import --string score: %+v", imp)
	}
	var rows []map[string]any
	h.json(&rows, "cat", "main:data/scores.parquet")
	if len(rows) != 3 || rows[0]["score"] != "1" || rows[2]["score"] != "n/a" {
		t.Fatalf("cat after import --string score: %v", rows)
	}
	h.fails(ExitUsage, []string{"--string applies to an inferred schema"}, "import", src, "main:data/x.parquet", "--string", "score", "--table", "prompts")
}

// TestImportNoRows imports files without a row (empty, blank lines, a
// CSV header alone, {} lines, a Parquet file of no rows, an empty Hugging
// Face split): each fails naming the file and saying what a row looks
// like, and leaves nothing behind: no temporary file, nothing staged or
// committed. An empty JSONL file used to panic and leave its temporary
// Parquet file.
func TestImportNoRows(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the import's temporary files go
	h := newStore(t)
	var empty bytes.Buffer
	if err := tables.Write(&empty, tables.Prompts, nil, nil); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join("hub", "datasets--org--empty", "snapshots", "0123456789abcdef0123456789abcdef01234567")
	h.file(filepath.Join(snap, "data", "train-00000-of-00001.parquet"), empty.String())
	snap = filepath.Join(h.dir, snap)
	for _, c := range []struct {
		name, file, content string
		args                []string
		want                string
	}{
		{"empty jsonl", "empty.jsonl", "", nil,
			`: no rows: the file is empty or holds only blank lines; write one JSON object per line, e.g. {"prompt_id":"p1","prompt":"2+2="}`},
		{"empty jsonl onto a branch that does not exist", "empty.jsonl", "", []string{"MAIN:data/x.parquet"}, ": no rows: the file is empty"},
		{"blank lines", "blank.jsonl", "\n   \n\n", nil, ": no rows: the file is empty or holds only blank lines"},
		{"blank lines into a table", "blank.jsonl", "\n   \n\n", []string{"main:data/x.parquet", "--table", "prompts"}, ": no rows: the file is empty"},
		{"empty objects", "objects.jsonl", "{}\n{}\n", nil, ": no rows with a column: every line is an empty JSON object {} (the first at line 1)"},
		{"csv header alone", "header.csv", "prompt_id,prompt\n", nil, ": no rows: the file holds a header (prompt_id,prompt) and no records below it; add one line of values per row"},
		{"empty csv", "empty.csv", "", nil, ": no rows: the file is empty or holds only blank lines; write a header line of column names"},
		{"parquet of no rows", "empty.parquet", empty.String(), nil,
			": no rows: the Parquet file holds the columns prompt_id, prompt, messages, answer, metadata, source, split and no row"},
		{"dataset import of an empty jsonl", "empty.jsonl", "", []string{"dataset", "import", "", "main:data/x.parquet"}, ": no rows: the file is empty"},
		{"dataset import of an empty parquet", "empty.parquet", empty.String(), []string{"dataset", "import", "", "main:data/x.parquet", "--question", "prompt"}, ": no rows: the file is empty"},
		{"dataset import of an empty hugging face split", "", "", []string{"dataset", "import", snap, "main:data/x.parquet", "--question", "prompt"},
			`: no rows: the split "train" (data/train-00000-of-00001.parquet) holds none; pick another with --split`},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"import", "", "main:data/x.parquet"}
			if len(c.args) > 0 && c.args[0] == "dataset" {
				args = c.args
			} else if c.args != nil {
				args = append([]string{"import", ""}, c.args...)
			}
			name := snap
			if c.file != "" {
				name = h.file(c.file, c.content)
			}
			for i, a := range args {
				if a == "" {
					args[i] = name
				}
			}
			h.fails(ExitFailure, []string{"import " + name + c.want}, args...)
			left, err := os.ReadDir(tmp)
			if err != nil {
				t.Fatal(err)
			}
			if len(left) != 0 {
				t.Errorf("left in the temporary directory: %v", left)
			}
			var unc []artifacts.Change
			h.json(&unc, "diff", "main")
			wantChanges(t, "staged", unc, []artifacts.Change{})
			var log []artifacts.Commit
			h.json(&log, "log", "main")
			if len(log) != 1 {
				t.Errorf("%d commits on main, want the first alone", len(log))
			}
		})
	}
}

// TestBranchTagRevert covers the remaining verbs that change refs.
func TestBranchTagRevert(t *testing.T) {
	h := newStore(t)
	h.stdin = "one"
	h.ok("put", "-", "main:a.txt")
	h.ok("put", "-", "main:keep/b.txt")
	var reset resetOut
	h.json(&reset, "branch", "reset", "main", "--prefix", "keep/")
	if reset.Branch != "main" || len(reset.Discarded) != 1 || reset.Discarded[0].Path != "keep/b.txt" {
		t.Fatalf("branch reset --prefix: %+v", reset)
	}
	var c1 artifacts.Commit
	h.json(&c1, "commit", "main", "-m", "one")

	var tag artifacts.Tag
	h.json(&tag, "tag", "create", "v1", "main")
	var tags []artifacts.Tag
	h.json(&tags, "tag", "list")
	if !slices.Equal(tags, []artifacts.Tag{{Name: "v1", CommitID: c1.ID}}) || tag != tags[0] {
		t.Fatalf("tags %+v, created %+v", tags, tag)
	}

	var rm rmOut
	h.json(&rm, "rm", "main:a.txt")
	h.ok("commit", "main", "-m", "remove a")
	h.fails(ExitFailure, []string{"object not found"}, "cat", "main:a.txt")
	if got := h.ok("cat", "v1:a.txt"); got != "one" {
		t.Fatalf("cat v1:a.txt = %q", got)
	}
	var rev artifacts.Commit
	h.json(&rev, "revert", "main", "main")
	if got := h.ok("cat", "main:a.txt"); got != "one" {
		t.Fatalf("after revert, cat main:a.txt = %q", got)
	}

	h.ok("branch", "create", "gone", "--from", "v1")
	var del deletedOut
	h.json(&del, "branch", "delete", "gone")
	h.json(&del, "tag", "delete", "v1")
	var branches []artifacts.Branch
	h.json(&branches, "branch", "list")
	if len(branches) != 1 || branches[0] != (artifacts.Branch{Name: "main", CommitID: rev.ID}) {
		t.Fatalf("branch list: %+v", branches)
	}
	h.json(&tags, "tag", "list")
	if tags == nil || len(tags) != 0 {
		t.Fatalf("tag list after delete: %+v", tags)
	}
}

func wantFile(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s:\n%s\nwant:\n%s", path, got, want)
	}
}

// A prefix exported with --format converts its Parquet tables and copies
// the rest, for readers without a Parquet library.
func TestExportPrefixConverts(t *testing.T) {
	h := newStore(t)
	h.ok("import", "../examples/standin/prompts.jsonl", "main:data/prompts.parquet", "--table", "prompts")
	h.ok("put", h.file("notes.txt", "hello\n"), "main:data/notes.txt")
	h.ok("commit", "main", "-m", "a table and a note")
	dir := filepath.Join(h.dir, "out")
	h.ok("export", "main:data/", dir, "--format", "jsonl")
	b, err := os.ReadFile(filepath.Join(dir, "prompts.jsonl"))
	if err != nil || !strings.HasPrefix(string(b), `{"prompt_id":`) {
		t.Fatalf("prompts.jsonl: %v %.80q", err, b)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "notes.txt")); err != nil || string(b) != "hello\n" {
		t.Fatalf("notes.txt: %v %q", err, b)
	}
	if _, err := os.Stat(filepath.Join(dir, "prompts.parquet")); err == nil {
		t.Error("the Parquet file was copied as well as converted")
	}
	h.fails(ExitUsage, []string{"a prefix converts its Parquet tables to csv or jsonl"}, "export", "main:data/", dir, "--format", "parquet")
}
