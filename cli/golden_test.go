package cli

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// TestGoldenText checks the text output of ls and log. Commit dates are
// fixed with --date; what still varies (the first commit's date, and so
// every commit id, and object mtimes) is masked.
func TestGoldenText(t *testing.T) {
	h := newStore(t)
	day := func(d int) string { return time.Date(2025, 1, d, 12, 0, 0, 0, time.UTC).Format(time.RFC3339) }
	// Raw files only: a Parquet file's size belongs to the tables package.
	h.ok("put", h.file("prompts.jsonl", promptsJSONL([2]int{12, 30}, [2]int{1, 2})), "main:data/prompts.jsonl")
	h.stdin = "hello\n"
	h.ok("put", "-", "main:notes/hello.txt")
	h.stdin = strings.Repeat("x", 3000)
	h.ok("put", "-", "main:data/raw/blob.bin")
	h.ok("commit", "main", "-m", "add prompts\n\nTwenty arithmetic problems.", "--committer", "tester", "--date", day(2), "--meta", "iteration=1", "--meta", "source=golden")
	h.ok("branch", "create", "try", "--from", "main")
	h.stdin = "hello again\n"
	h.ok("put", "-", "try:notes/hello.txt")
	h.ok("commit", "try", "-m", "reword hello", "--committer", "tester", "--date", day(3))
	h.ok("merge", "try", "main", "--committer", "tester", "--date", day(4))

	var log []artifacts.Commit
	h.json(&log, "log", "main")
	mask := masker(log)

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"ls_root.txt", []string{"ls", "main:"}},
		{"ls_data.txt", []string{"ls", "main:data"}},
		{"ls_recursive.txt", []string{"ls", "main:", "--recursive"}},
		{"log.txt", []string{"log", "main"}},
		{"log_oneline.txt", []string{"log", "main", "--oneline"}},
		{"diff.txt", []string{"diff", "main~1", "main", "--two-dot"}},
		{"branch_list.txt", []string{"branch", "list"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			golden(t, tc.name, mask(h.ok(tc.args...)))
		})
	}
}

// masker replaces what differs between runs: commit ids (by their place
// in log, newest first), the first commit's committer, and the times not
// fixed with --date (the first commit's date, object modification times).
func masker(log []artifacts.Commit) func(string) string {
	var pairs []string
	for i, c := range log {
		pairs = append(pairs, c.ID, fmt.Sprintf("<commit-%d>", i+1), shortID(c.ID), fmt.Sprintf("<c%d>", i+1))
	}
	// The store names the first commit's committer after the user running it.
	pairs = append(pairs, "Committer:  "+log[len(log)-1].Committer+"\n", "Committer:  <user>\n")
	ids := strings.NewReplacer(pairs...)
	now := regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ`)
	return func(s string) string {
		s = ids.Replace(s)
		return now.ReplaceAllStringFunc(s, func(ts string) string {
			if strings.HasPrefix(ts, "2025-01-0") { // a --date we set
				return ts
			}
			return "YYYY-MM-DD hh:mm:ssZ"
		})
	}
}
