package cli

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
)

// Two runs of one seeded config without the cache write the same bytes
// with new creation times: diff compares content, so they do not differ;
// --metadata lists the paths whose metadata alone differs, and a real
// change of content is still a change. Two iterations (smallArithRun's 4
// cut to 2, evaluated at 2): the test reads iterations 1 and 2 only.
func TestDiffComparesContent(t *testing.T) {
	h := newStore(t)
	h.ok("dataset", "arith", "main", "--train", "256", "--heldout", "50")
	cfg := h.file("pipeline.yaml", arithExample(t, map[string]string{
		"iterations: 60": "iterations: 2", "every: 10": "every: 2", "n: 16": "n: 4", "k: [1, 4, 8, 16]": "k: [1, 4]",
	}))
	h.ok("run", "-f", cfg)
	h.ok("run", "-f", cfg, "--run", "again", "--no-cache", "--no-report")
	// Creation times are whole seconds, so the two runs' may or may not
	// differ: one object is put again, same bytes, with other metadata,
	// so that at least one path differs in metadata alone.
	same := filepath.Join(h.dir, "same.parquet")
	h.ok("export", "runs-again:iterations/000001/rewards.parquet", same)
	h.ok("put", same, "runs-again:iterations/000001/rewards.parquet", "--meta", "note=relabelled")
	h.ok("commit", "runs-again", "-m", "relabel the rewards of iteration 1")
	out := h.ok("diff", "runs-arith", "runs-again", "--two-dot", "--prefix", "iterations/")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || lines[0] != "no changes between runs-arith and runs-again under iterations/ in content" ||
		!strings.HasSuffix(lines[1], " paths have the same content and differ only in metadata (--metadata lists them)") {
		t.Fatalf("diff of two identical runs:\n%s", out)
	}
	var plain, meta []artifacts.Change
	h.json(&plain, "diff", "runs-arith", "runs-again", "--two-dot", "--prefix", "iterations/")
	h.json(&meta, "diff", "runs-arith", "runs-again", "--two-dot", "--prefix", "iterations/", "--metadata")
	relabelled := slices.ContainsFunc(meta, func(c artifacts.Change) bool { return c.Path == "iterations/000001/rewards.parquet" })
	if len(plain) != 0 || !relabelled {
		t.Fatalf("json: %d changes without --metadata, %d with (the relabelled rewards among them: %v); want 0, and the relabelled rewards", len(plain), len(meta), relabelled)
	}
	for _, c := range meta {
		if c.Type != ChangeMetadata {
			t.Errorf("--metadata: %+v, want type metadata", c)
		}
	}
	if !strings.Contains(lines[1], itoa(len(meta))+" paths") {
		t.Errorf("the count line %q does not count the %d paths --metadata lists", lines[1], len(meta))
	}

	// A real change of content.
	other := filepath.Join(h.dir, "r.parquet")
	h.ok("export", "runs-arith:iterations/000002/rewards.parquet", other)
	h.ok("put", other, "runs-again:iterations/000001/rewards.parquet")
	h.ok("commit", "runs-again", "-m", "other rewards")
	out = h.ok("diff", "runs-arith", "runs-again", "--two-dot", "--prefix", "iterations/")
	first, rest, _ := strings.Cut(out, "\n")
	// The other paths differ in metadata only when the two runs' creation
	// times fell in different seconds (the relabelled one now differs in
	// content): then a count line follows, else nothing.
	count := strings.HasSuffix(rest, "paths have the same content and differ only in metadata (--metadata lists them)\n")
	if strings.Join(strings.Fields(first), " ") != "~ changed iterations/000001/rewards.parquet" ||
		(len(meta) > 1) != count || (!count && rest != "") {
		t.Fatalf("want the one changed table, then the count of the others (%d paths differed in metadata before):\n%s", len(meta)-1, out)
	}
	// Three-dot: what runs-again changed since it forked from main.
	if out := h.ok("diff", "runs-arith", "runs-again", "--metadata", "--prefix", "iterations/000001/"); !strings.Contains(out, "iterations/000001/rewards.parquet") {
		t.Errorf("three-dot diff:\n%s", out)
	}
}
