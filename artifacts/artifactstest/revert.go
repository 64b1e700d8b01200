package artifactstest

import (
	"github.com/rlpipe/rlpipe/artifacts"
)

var revertScenarios = []scenario{
	{"Commit", testRevertCommit},
	{"DirtyBranch", testRevertDirty},
	{"MergeCommit", testRevertMerge},
}

// reverter returns the store's Reverter or skips the test.
func reverter(f *fixture) artifacts.Reverter { return ability[artifacts.Reverter](f) }

func testRevertCommit(f *fixture) {
	t := f.t
	r := reverter(f)
	f.puts("main", "model.bin", "v1", "old.txt", "old")
	f.commit("main", "v1")
	f.puts("main", "model.bin", "v2", "added.txt", "added")
	f.del("main", "old.txt")
	bad := f.commit("main", "v2")
	f.putCommit("main", "later.txt", "later")
	head := f.head("main")

	c, err := r.Revert(f.ctx, "main", bad.ID, 0, nil)
	if err != nil {
		t.Fatalf("revert %s: %v", bad.ID, err)
	}
	wantSlice(t, "revert commit parents", c.Parents, []string{head})
	wantEqual(t, "main head after revert", f.head("main"), c.ID)
	f.wantContents("main", "model.bin", "v1", "old.txt", "old")
	f.wantMissing("main", "added.txt")
	f.wantContent("main", "later.txt", "later")
	f.wantChanges("diff uncommitted after revert", f.st.DiffUncommitted(f.ctx, "main"))
	f.wantChanges("diff of the revert", f.st.Diff(f.ctx, head, c.ID, twoDot),
		"removed added.txt", "changed model.bin", "added old.txt")

	// A ref expression names the commit too: revert the revert.
	if _, err := r.Revert(f.ctx, "main", "main", 1, nil); err != nil {
		t.Fatalf("revert main: %v", err)
	}
	f.wantContents("main", "model.bin", "v2", "added.txt", "added")
	f.wantMissing("main", "old.txt")
}

func testRevertDirty(f *fixture) {
	t := f.t
	r := reverter(f)
	c := f.putCommit("main", "a", "1")
	f.put("main", "wip", "staged")
	_, err := r.Revert(f.ctx, "main", c.ID, 0, nil)
	wantErr(t, "revert on a branch with staged changes", err, artifacts.ErrDirtyBranch, artifacts.ErrConflict)
	wantEqual(t, "main head after a refused revert", f.head("main"), c.ID)
	f.wantContents("main", "a", "1", "wip", "staged")

	_, err = r.Revert(f.ctx, "main", "no-such-ref", 0, nil)
	wantErr(t, "revert a missing ref", err, artifacts.ErrNotFound, artifacts.ErrConflict)
}

func testRevertMerge(f *fixture) {
	t := f.t
	r := reverter(f)
	m1, _, _, merge := mergedHistory(f)
	c, err := r.Revert(f.ctx, "main", merge.ID, 1, nil)
	if err != nil {
		t.Fatalf("revert the merge against its first parent: %v", err)
	}
	wantSlice(t, "revert of a merge: parents", c.Parents, []string{merge.ID})
	f.wantMissing("main", "feature/one")
	f.wantMissing("main", "feature/two")
	f.wantContent("main", "main/one", "1")
	f.wantChanges("diff m1..main after revert", f.st.Diff(f.ctx, m1.ID, "main", twoDot))
}
