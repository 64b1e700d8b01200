package artifactstest

import (
	"errors"
	"slices"

	"github.com/rlpipe/rlpipe/artifacts"
)

var mergeScenarios = []scenario{
	{"Clean", testMergeClean},
	{"Conflict", testMergeConflict},
	{"Strategies", testMergeStrategies},
	{"SameChangeOnBothSides", testMergeSameChange},
	{"DirtyDestination", testMergeDirty},
	{"NothingToMerge", testMergeNothing},
	{"AllowEmpty", testMergeAllowEmpty},
	{"MergeBase", testMergeBase},
	{"BadRefs", testMergeBadRefs},
}

// forked commits a base on main and creates branch feature from it.
func forked(f *fixture, files map[string]string) artifacts.Commit {
	f.t.Helper()
	for _, p := range slices.Sorted(mapKeys(files)) {
		f.put("main", p, files[p])
	}
	c := f.commit("main", "base")
	f.branch("feature", "main")
	return c
}

func testMergeClean(f *fixture) {
	t := f.t
	m := merger(f)
	forked(f, map[string]string{"a": "a0", "b": "b0", "c": "c0"})
	f.puts("feature", "a", "a1", "new/from-feature", "f")
	f.del("feature", "c")
	src := f.commit("feature", "feature work")
	dst := f.putCommit("main", "b", "b1")

	meta := map[string]string{"rlpipe-run": "r1"}
	merge, err := m.Merge(f.ctx, "feature", "main", &artifacts.MergeOptions{Message: "merge feature", Metadata: meta})
	if err != nil {
		t.Fatalf("merge feature into main: %v", err)
	}
	wantSlice(t, "merge commit parents", merge.Parents, []string{dst.ID, src.ID})
	wantEqual(t, "merge commit message", merge.Message, "merge feature")
	for k, v := range meta {
		wantEqual(t, "merge commit metadata "+k, merge.Metadata[k], v)
	}
	wantEqual(t, "main head after merge", f.head("main"), merge.ID)
	wantEqual(t, "feature head after merge", f.head("feature"), src.ID)
	got := f.resolve(merge.ID)
	wantSlice(t, "resolved merge commit parents", got.Parents, []string{dst.ID, src.ID})

	f.wantContents("main", "a", "a1", "b", "b1")
	f.wantMissing("main", "c")
	f.wantContent("main", "new/from-feature", "f")
	f.wantChanges("diff uncommitted after merge", f.st.DiffUncommitted(f.ctx, "main"))
	// The source is untouched.
	f.wantContent("feature", "b", "b0")
	f.wantChanges("diff dst..merge", f.st.Diff(f.ctx, dst.ID, merge.ID, twoDot),
		"changed a", "removed c", "added new/from-feature")
	// After the merge the source is the merge base: it changed nothing
	// since, and main's own work is all a three-dot diff from it shows.
	f.wantChanges("diff main...feature after merge", f.st.Diff(f.ctx, "main", "feature", nil))
	f.wantChanges("diff feature...main after merge", f.st.Diff(f.ctx, "feature", "main", nil), "changed b")
}

func testMergeConflict(f *fixture) {
	t := f.t
	m := merger(f)
	forked(f, map[string]string{"x": "0", "y": "0", "d": "0", "z": "0"})
	f.puts("main", "x", "main", "y", "main")
	f.del("main", "d")
	dst := f.commit("main", "main work")
	f.puts("feature", "x", "feature", "y", "feature", "d", "feature", "z", "feature only")
	f.commit("feature", "feature work")

	_, err := m.Merge(f.ctx, "feature", "main", nil)
	var mc *artifacts.MergeConflictError
	if !errors.As(err, &mc) {
		t.Fatalf("merge conflicting branches: got error %v, want a *artifacts.MergeConflictError", err)
	}
	wantErr(t, "merge conflicting branches", err, artifacts.ErrMergeConflict)
	for _, p := range []string{"x", "y", "d"} {
		if !slices.Contains(mc.Paths, p) {
			t.Fatalf("merge conflict: paths %v do not list %s", mc.Paths, p)
		}
	}
	if slices.Contains(mc.Paths, "z") {
		t.Fatalf("merge conflict: paths %v list z, changed on one side only", mc.Paths)
	}
	// Nothing moved.
	wantEqual(t, "main head after a refused merge", f.head("main"), dst.ID)
	f.wantContent("main", "x", "main")
	f.wantMissing("main", "d")
	f.wantContent("main", "z", "0")
	f.wantChanges("diff uncommitted after a refused merge", f.st.DiffUncommitted(f.ctx, "main"))
}

func testMergeStrategies(f *fixture) {
	t := f.t
	m := merger(f)
	forked(f, map[string]string{"x": "0"})
	f.branch("other", "main")
	f.putCommit("main", "x", "main")
	f.puts("feature", "x", "feature", "from-feature", "f")
	src := f.commit("feature", "feature work")
	f.puts("other", "x", "other", "from-other", "o")
	f.commit("other", "other work")

	merge, err := m.Merge(f.ctx, "feature", "main", &artifacts.MergeOptions{Strategy: artifacts.StrategySourceWins})
	if err != nil {
		t.Fatalf("merge feature into main, source wins: %v", err)
	}
	f.wantContents("main", "x", "feature", "from-feature", "f")
	if len(merge.Parents) != 2 || merge.Parents[1] != src.ID {
		t.Fatalf("source-wins merge parents: got %v, want second parent %s", merge.Parents, src.ID)
	}

	_, err = m.Merge(f.ctx, "other", "main", &artifacts.MergeOptions{Strategy: artifacts.StrategyDestWins})
	if err != nil {
		t.Fatalf("merge other into main, destination wins: %v", err)
	}
	f.wantContents("main", "x", "feature", "from-other", "o", "from-feature", "f")
}

func testMergeSameChange(f *fixture) {
	t := f.t
	m := merger(f)
	forked(f, map[string]string{"x": "0", "gone": "g"})
	f.put("main", "x", "same")
	f.del("main", "gone")
	f.commit("main", "main work")
	f.put("feature", "x", "same")
	f.del("feature", "gone")
	f.put("feature", "extra", "e")
	src := f.commit("feature", "feature work")

	merge, err := m.Merge(f.ctx, "feature", "main", nil)
	if err != nil {
		t.Fatalf("merge identical changes: %v", err)
	}
	if len(merge.Parents) != 2 || merge.Parents[1] != src.ID {
		t.Fatalf("merge parents: got %v, want second parent %s", merge.Parents, src.ID)
	}
	f.wantContent("main", "x", "same")
	f.wantMissing("main", "gone")
	f.wantContent("main", "extra", "e")
}

func testMergeDirty(f *fixture) {
	t := f.t
	m := merger(f)
	forked(f, map[string]string{"a": "0"})
	f.putCommit("feature", "a", "feature")
	dst := f.head("main")
	f.put("main", "wip", "staged")

	_, err := m.Merge(f.ctx, "feature", "main", nil)
	wantErr(t, "merge into a branch with staged changes", err, artifacts.ErrDirtyBranch, artifacts.ErrConflict)
	wantEqual(t, "main head after a refused merge", f.head("main"), dst)
	f.wantContents("main", "wip", "staged", "a", "0")

	// Committing the staged change lets the merge through.
	f.commit("main", "wip")
	if _, err := m.Merge(f.ctx, "feature", "main", nil); err != nil {
		t.Fatalf("merge after committing: %v", err)
	}
	f.wantContents("main", "a", "feature", "wip", "staged")
}

func testMergeNothing(f *fixture) {
	t := f.t
	m := merger(f)
	forked(f, map[string]string{"a": "0"})
	dst := f.head("main")

	_, err := m.Merge(f.ctx, "feature", "main", nil)
	wantErr(t, "merge a branch with no commits of its own", err, artifacts.ErrNoChanges)
	f.commitWith("feature", "empty", &artifacts.CommitOptions{AllowEmpty: true})
	_, err = m.Merge(f.ctx, "feature", "main", nil)
	wantErr(t, "merge a branch with only an empty commit", err, artifacts.ErrNoChanges)
	wantEqual(t, "main head after refused merges", f.head("main"), dst)

	// Merging the same work twice brings nothing the second time.
	f.putCommit("feature", "a", "1")
	if _, err := m.Merge(f.ctx, "feature", "main", nil); err != nil {
		t.Fatalf("merge feature: %v", err)
	}
	after := f.head("main")
	_, err = m.Merge(f.ctx, "feature", "main", nil)
	wantErr(t, "merge an already merged branch", err, artifacts.ErrNoChanges)
	wantEqual(t, "main head after a second merge", f.head("main"), after)
}

func testMergeAllowEmpty(f *fixture) {
	t := f.t
	m := merger(f)
	forked(f, map[string]string{"a": "0"})
	src := f.commitWith("feature", "empty", &artifacts.CommitOptions{AllowEmpty: true})
	dst := f.head("main")
	merge, err := m.Merge(f.ctx, "feature", "main", &artifacts.MergeOptions{AllowEmpty: true, Message: "record"})
	if err != nil {
		t.Fatalf("merge with allow empty: %v", err)
	}
	wantSlice(t, "empty merge parents", merge.Parents, []string{dst, src.ID})
	wantEqual(t, "main head after empty merge", f.head("main"), merge.ID)
	f.wantContent("main", "a", "0")
}

func testMergeBase(f *fixture) {
	t := f.t
	m := merger(f)
	base := forked(f, map[string]string{"a": "0"})
	wantBase := func(left, right, want string) {
		t.Helper()
		c, err := m.MergeBase(f.ctx, left, right)
		if err != nil {
			t.Fatalf("merge base of %s and %s: %v", left, right, err)
		}
		wantEqual(t, "merge base of "+left+" and "+right, c.ID, want)
	}
	wantBase("main", "feature", base.ID)
	f.putCommit("main", "m", "1")
	src := f.putCommit("feature", "f", "1")
	f.putCommit("feature", "f", "2")
	wantBase("main", "feature", base.ID)
	wantBase("feature", "main", base.ID)
	wantBase("main", src.ID, base.ID)
	wantBase("main", "main~1", base.ID)

	if _, err := m.Merge(f.ctx, "feature", "main", nil); err != nil {
		t.Fatalf("merge: %v", err)
	}
	wantBase("main", "feature", f.head("feature"))
	wantBase("feature", "main", f.head("feature"))

	_, err := m.MergeBase(f.ctx, "main", "no-such-ref")
	wantErr(t, "merge base with a missing ref", err, artifacts.ErrNotFound)
}

func testMergeBadRefs(f *fixture) {
	t := f.t
	m := merger(f)
	forked(f, map[string]string{"a": "0"})
	c := f.putCommit("feature", "a", "1")
	if _, err := f.st.CreateTag(f.ctx, "v1", "main"); err != nil {
		t.Fatalf("create tag: %v", err)
	}
	_, err := m.Merge(f.ctx, "no-such-ref", "main", nil)
	wantErr(t, "merge a missing ref", err, artifacts.ErrNotFound)
	_, err = m.Merge(f.ctx, "feature", "no-such-branch", nil)
	wantErr(t, "merge into a missing branch", err, artifacts.ErrNotFound)
	_, err = m.Merge(f.ctx, "feature", "v1", nil)
	wantErr(t, "merge into a tag", err, artifacts.ErrInvalid, artifacts.ErrNotFound)

	// A commit id is a valid source; the destination gets a merge commit
	// even though it has not moved since the fork.
	dst := f.head("main")
	merge, err := m.Merge(f.ctx, c.ID, "main", nil)
	if err != nil {
		t.Fatalf("merge a commit id: %v", err)
	}
	wantSlice(t, "merge of a commit id: parents", merge.Parents, []string{dst, c.ID})
	f.wantContent("main", "a", "1")
}
