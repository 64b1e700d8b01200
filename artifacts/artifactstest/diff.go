package artifactstest

import (
	"github.com/rlpipe/rlpipe/artifacts"
)

var diffScenarios = []scenario{
	{"TwoDotAndThreeDot", testDiffDots},
	{"ChangeTypes", testDiffTypes},
	{"SameBytesIsNoChange", testDiffSameBytes},
	{"Prefix", testDiffPrefix},
	{"Identical", testDiffIdentical},
}

var twoDot = &artifacts.DiffOptions{TwoDot: true}

func testDiffDots(f *fixture) {
	t := f.t
	f.puts("main", "x", "x0", "y", "y0")
	f.commit("main", "base")
	f.branch("b", "main")
	f.putCommit("main", "x", "x1")
	f.putCommit("b", "y", "y1")

	f.wantChanges("diff main..b", f.st.Diff(f.ctx, "main", "b", twoDot), "changed x", "changed y")
	f.wantChanges("diff b..main", f.st.Diff(f.ctx, "b", "main", twoDot), "changed x", "changed y")
	f.wantChanges("diff main...b", f.st.Diff(f.ctx, "main", "b", &artifacts.DiffOptions{}), "changed y")
	f.wantChanges("diff main...b with nil options", f.st.Diff(f.ctx, "main", "b", nil), "changed y")
	f.wantChanges("diff b...main", f.st.Diff(f.ctx, "b", "main", nil), "changed x")

	// The same through commit ids.
	mainHead, bHead := f.head("main"), f.head("b")
	f.wantChanges("diff of commit ids, two-dot", f.st.Diff(f.ctx, mainHead, bHead, twoDot), "changed x", "changed y")
	f.wantChanges("diff of commit ids, three-dot", f.st.Diff(f.ctx, mainHead, bHead, nil), "changed y")

	// After an addition on main only, main...b still lists only b's work.
	f.putCommit("main", "z", "z0")
	f.wantChanges("diff main...b after more work on main", f.st.Diff(f.ctx, "main", "b", nil), "changed y")
	f.wantChanges("diff main..b after more work on main", f.st.Diff(f.ctx, "main", "b", twoDot), "changed x", "changed y", "removed z")

	_, err := collectErr(f.st.Diff(f.ctx, "main", "no-such-ref", nil))
	wantErr(t, "diff against a missing ref", err, artifacts.ErrNotFound)
	_, err = collectErr(f.st.Diff(f.ctx, "no-such-ref", "main", twoDot))
	wantErr(t, "diff from a missing ref", err, artifacts.ErrNotFound)
}

func testDiffTypes(f *fixture) {
	f.puts("main", "keep", "k", "change", "c0", "remove", "r")
	base := f.commit("main", "base")
	f.branch("b", "main")
	f.puts("b", "add", "a", "change", "c1")
	f.del("b", "remove")
	c := f.commit("b", "work")

	f.wantChanges("diff main..b", f.st.Diff(f.ctx, "main", "b", twoDot), "added add", "changed change", "removed remove")
	f.wantChanges("diff b..main", f.st.Diff(f.ctx, "b", "main", twoDot), "removed add", "changed change", "added remove")
	f.wantChanges("diff main...b", f.st.Diff(f.ctx, "main", "b", nil), "added add", "changed change", "removed remove")
	f.wantChanges("diff base..work", f.st.Diff(f.ctx, base.ID, c.ID, twoDot), "added add", "changed change", "removed remove")

	// Sizes of added and changed objects are the right side's.
	for _, ch := range collect(f.t, "diff main..b", f.st.Diff(f.ctx, "main", "b", twoDot)) {
		switch ch.Path {
		case "add":
			wantEqual(f.t, "size of added", ch.Size, int64(1))
		case "change":
			wantEqual(f.t, "size of changed", ch.Size, int64(2))
		}
	}
}

// testDiffSameBytes writes the committed bytes back: lakeFS compares
// entries by size, checksum, metadata and content type, so nothing changed.
func testDiffSameBytes(f *fixture) {
	f.puts("main", "keep", "k", "change", "c0", "remove", "r")
	f.commit("main", "base")
	f.branch("b", "main")
	f.puts("b", "add", "a", "change", "c1")
	f.del("b", "remove")
	f.commit("b", "work")
	f.puts("b", "change", "c0", "remove", "r")
	f.del("b", "add")
	f.commit("b", "undo")
	f.wantChanges("diff main..b after undoing", f.st.Diff(f.ctx, "main", "b", twoDot))
	f.wantChanges("diff main...b after undoing", f.st.Diff(f.ctx, "main", "b", nil))
}

func testDiffPrefix(f *fixture) {
	f.puts("main", "dir1/a", "a0", "dir2/b", "b0")
	f.commit("main", "base")
	f.branch("b", "main")
	f.puts("b", "dir1/a", "a1", "dir1/sub/c", "c", "dir2/b", "b1", "dir10/d", "d")
	f.commit("b", "work")

	f.wantChanges("diff main..b under dir1/", f.st.Diff(f.ctx, "main", "b", &artifacts.DiffOptions{TwoDot: true, Prefix: "dir1/"}),
		"changed dir1/a", "added dir1/sub/c")
	f.wantChanges("diff main...b under dir1/", f.st.Diff(f.ctx, "main", "b", &artifacts.DiffOptions{Prefix: "dir1/"}),
		"changed dir1/a", "added dir1/sub/c")
	f.wantChanges("diff main...b under dir1", f.st.Diff(f.ctx, "main", "b", &artifacts.DiffOptions{Prefix: "dir1"}),
		"changed dir1/a", "added dir1/sub/c", "added dir10/d")
	f.wantChanges("diff main...b under zz/", f.st.Diff(f.ctx, "main", "b", &artifacts.DiffOptions{Prefix: "zz/"}))
	f.wantChanges("diff main...b", f.st.Diff(f.ctx, "main", "b", nil),
		"changed dir1/a", "added dir1/sub/c", "added dir10/d", "changed dir2/b")
}

func testDiffIdentical(f *fixture) {
	t := f.t
	c := f.putCommit("main", "a", "1")
	if _, err := f.st.CreateTag(f.ctx, "v1", "main"); err != nil {
		t.Fatalf("create tag: %v", err)
	}
	f.branch("b", "main")
	pairs := [][2]string{{"main", "main"}, {"main", c.ID}, {"v1", "main"}, {"main", "b"}, {f.base.ID, f.base.ID}}
	for _, p := range pairs {
		f.wantChanges("diff "+p[0]+".."+p[1], f.st.Diff(f.ctx, p[0], p[1], twoDot))
		f.wantChanges("diff "+p[0]+"..."+p[1], f.st.Diff(f.ctx, p[0], p[1], nil))
	}
}
