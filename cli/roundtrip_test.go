package cli

import (
	"slices"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
)

// TestRoundTrip walks the store the way the README does: import, commit,
// branch, change, diff, merge, log, cat, checking the JSON of each step.
func TestRoundTrip(t *testing.T) {
	h := newStore(t)
	day := func(d int) string { return time.Date(2025, 1, d, 12, 0, 0, 0, time.UTC).Format(time.RFC3339) }

	// import a JSONL dataset as a Parquet table.
	src := h.file("prompts.jsonl", promptsJSONL([2]int{12, 30}, [2]int{1, 2}, [2]int{7, 8}))
	var imp importOut
	h.json(&imp, "import", src, "main:data/prompts.parquet")
	if imp.Ref != "main" || imp.Path != "data/prompts.parquet" || imp.Format != "jsonl" || imp.Rows == nil || *imp.Rows != 3 ||
		imp.ContentType != "application/vnd.apache.parquet" || imp.Size == 0 || len(imp.Checksum) != 64 {
		t.Fatalf("import: %+v", imp)
	}

	// commit it with metadata and a fixed date.
	var c1 artifacts.Commit
	h.json(&c1, "commit", "main", "-m", "add prompts", "--meta", "source=test", "--committer", "tester", "--date", day(2))
	root := mustResolve(t, h, "main~1")
	wantCommit(t, c1, "add prompts", "tester", day(2), map[string]string{"source": "test"}, root)

	// branch, and change the table and add a file on the branch.
	var br artifacts.Branch
	h.json(&br, "branch", "create", "try", "--from", "main")
	if br != (artifacts.Branch{Name: "try", CommitID: c1.ID}) {
		t.Fatalf("branch create: %+v, want try at %s", br, c1.ID)
	}
	changed := h.file("changed.jsonl", promptsJSONL([2]int{12, 30}, [2]int{1, 2}, [2]int{7, 8}, [2]int{20, 22}))
	var imp2 importOut
	h.json(&imp2, "import", changed, "try:data/prompts.parquet")
	h.stdin = "hello\n"
	var put objectOut
	h.json(&put, "put", "-", "try:notes/hello.txt")
	if put.Ref != "try" || put.Path != "notes/hello.txt" || put.Size != 6 || put.ContentType != "text/plain" {
		t.Fatalf("put: %+v", put)
	}

	// diff BRANCH lists the uncommitted changes; after the commit, diff
	// LEFT RIGHT lists the same.
	want := []artifacts.Change{
		{Type: artifacts.ChangeModified, Path: "data/prompts.parquet", Size: imp2.Size},
		{Type: artifacts.ChangeAdded, Path: "notes/hello.txt", Size: 6},
	}
	var unc []artifacts.Change
	h.json(&unc, "diff", "try")
	wantChanges(t, "diff try", unc, want)
	var c2 artifacts.Commit
	h.json(&c2, "commit", "try", "-m", "add a prompt", "--committer", "tester", "--date", day(3))
	wantCommit(t, c2, "add a prompt", "tester", day(3), nil, c1.ID)
	h.json(&unc, "diff", "try")
	wantChanges(t, "diff try after commit", unc, []artifacts.Change{})
	var d []artifacts.Change
	h.json(&d, "diff", "main", "try")
	wantChanges(t, "diff main try", d, want)
	h.json(&d, "diff", "main", "try", "--prefix", "notes/")
	wantChanges(t, "diff main try --prefix notes/", d, want[1:])

	// merge the branch back; main now has both parents.
	var m artifacts.Commit
	h.json(&m, "merge", "try", "main", "--committer", "tester", "--date", day(4))
	wantCommit(t, m, "merge try into main", "tester", day(4), nil, c1.ID, c2.ID)
	h.json(&d, "diff", "main", "try", "--two-dot")
	wantChanges(t, "diff after merge", d, []artifacts.Change{})

	// log shows the history newest first; --first-parent skips the branch.
	var log []artifacts.Commit
	h.json(&log, "log", "main")
	if got := ids(log); !slices.Equal(got, []string{m.ID, c2.ID, c1.ID, root}) {
		t.Fatalf("log main: %v", got)
	}
	if log[0].Message != m.Message || !log[0].CreationDate.Equal(m.CreationDate) {
		t.Fatalf("log main[0] = %+v, want %+v", log[0], m)
	}
	h.json(&log, "log", "main", "--first-parent", "--limit", "2")
	if got := ids(log); !slices.Equal(got, []string{m.ID, c1.ID}) {
		t.Fatalf("log main --first-parent --limit 2: %v", got)
	}
	h.json(&log, "log", "main", "--path", "notes/hello.txt")
	if got := ids(log); !slices.Equal(got, []string{m.ID, c2.ID}) {
		t.Fatalf("log main --path notes/hello.txt: %v", got)
	}

	// cat prints the table's rows and the raw file's bytes.
	got := h.ok("cat", "main:data/prompts.parquet", "-o", "json")
	wantRows := `[
  {"prompt_id":"p0001","prompt":"12+30=","answer":"42"},
  {"prompt_id":"p0002","prompt":"1+2=","answer":"3"},
  {"prompt_id":"p0003","prompt":"7+8=","answer":"15"},
  {"prompt_id":"p0004","prompt":"20+22=","answer":"42"}
]
`
	if got != wantRows {
		t.Fatalf("cat -o json:\n%s\nwant:\n%s", got, wantRows)
	}
	got = h.ok("cat", "main:data/prompts.parquet", "--limit", "2")
	wantText := "prompt_id  prompt  answer\np0001      12+30=  42\np0002      1+2=    3\n(2 of 4 rows)\n"
	if got != wantText {
		t.Fatalf("cat --limit 2:\n%s\nwant:\n%s", got, wantText)
	}
	if got := h.ok("cat", "main:notes/hello.txt"); got != "hello\n" {
		t.Fatalf("cat notes/hello.txt = %q", got)
	}
	// The first commit still holds the first version.
	wantFirst := `[
  {"prompt_id":"p0001","prompt":"12+30=","answer":"42"},
  {"prompt_id":"p0002","prompt":"1+2=","answer":"3"},
  {"prompt_id":"p0003","prompt":"7+8=","answer":"15"}
]
`
	if got := h.ok("cat", c1.ID[:10]+":data/prompts.parquet", "-o", "json"); got != wantFirst {
		t.Fatalf("cat at the first commit:\n%s\nwant:\n%s", got, wantFirst)
	}
}

func mustResolve(t *testing.T, h *harness, ref string) string {
	t.Helper()
	var log []artifacts.Commit
	h.json(&log, "log", ref, "--limit", "1")
	if len(log) != 1 {
		t.Fatalf("log %s --limit 1: %d commits", ref, len(log))
	}
	return log[0].ID
}

func wantCommit(t *testing.T, c artifacts.Commit, msg, committer, date string, meta map[string]string, parents ...string) {
	t.Helper()
	wantDate, _ := time.Parse(time.RFC3339, date)
	if c.Message != msg || c.Committer != committer || !c.CreationDate.Equal(wantDate) ||
		!slices.Equal(c.Parents, parents) || !artifacts.IsCommitID(c.ID) || len(c.Metadata) != len(meta) {
		t.Fatalf("commit %+v\nwant message %q, committer %q, date %s, parents %v, metadata %v", c, msg, committer, date, parents, meta)
	}
	for k, v := range meta {
		if c.Metadata[k] != v {
			t.Fatalf("commit metadata %v, want %v", c.Metadata, meta)
		}
	}
}

func wantChanges(t *testing.T, what string, got, want []artifacts.Change) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: JSON null, want an array", what)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func ids(cs []artifacts.Commit) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}
