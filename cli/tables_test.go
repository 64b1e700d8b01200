package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// TestRangeReaderAt reads a stored table through ranged reads, the way the
// UI reads tables too large to fetch whole, and checks it prints the rows
// the whole file gives.
func TestRangeReaderAt(t *testing.T) {
	h := newStore(t)
	h.ok("import", h.file("p.jsonl", promptsJSONL([2]int{1, 2}, [2]int{3, 4}, [2]int{5, 6})), "main:p.parquet")
	want := h.ok("cat", "main:p.parquet", "-o", "json")

	ctx := context.Background()
	st := h.openStore()
	var rr artifacts.RangeReader = st
	info, err := st.StatObject(ctx, "main", "p.parquet")
	if err != nil {
		t.Fatal(err)
	}
	f, err := tables.OpenFile(artifacts.RangeReaderAt(ctx, rr, "main", "p.parquet"), info.Size, "main:p.parquet", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	if err := writeTableJSON(ctx, &got, f, 0); err != nil {
		t.Fatal(err)
	}
	if got.String() != want {
		t.Fatalf("ranged read:\n%s\nwant:\n%s", got.String(), want)
	}
}

func TestCellText(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   any
		want string
	}{
		{"null", nil, "null"},
		{"newlines escaped", "a\nb\tc", `a\nb\tc`},
		{"float", 0.25, "0.25"},
		{"list as JSON", []any{int64(1), "x"}, `[1,"x"]`},
		{"long text cut", strings.Repeat("é", 100), strings.Repeat("é", maxCellWidth-1) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cellText(tc.in); got != tc.want {
				t.Fatalf("cellText(%v) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// FuzzArgs checks the argument parsers: no panic, and every rejection is
// a usage mistake.
func FuzzArgs(f *testing.F) {
	for _, s := range []string{"main:data/x.parquet", "main~2^1:", "k=v", "=v", "a b:c", "", ":", "v1.0@:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := parseArtifact(s); err != nil && exitCode(err) != ExitUsage {
			t.Fatalf("parseArtifact(%q): %v is not a usage error", s, err)
		}
		if _, err := parseObjectArtifact(s); err != nil && exitCode(err) != ExitUsage {
			t.Fatalf("parseObjectArtifact(%q): %v is not a usage error", s, err)
		}
		m, err := parseMeta([]string{s})
		if err != nil && exitCode(err) != ExitUsage {
			t.Fatalf("parseMeta(%q): %v is not a usage error", s, err)
		}
		for k := range m {
			if k == "" {
				t.Fatalf("parseMeta(%q) gave an empty key", s)
			}
		}
		if _, err := parseDate(s); err != nil && exitCode(err) != ExitUsage {
			t.Fatalf("parseDate(%q): %v is not a usage error", s, err)
		}
	})
}
