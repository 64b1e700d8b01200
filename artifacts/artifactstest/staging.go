package artifactstest

import (
	"github.com/rlpipe/rlpipe/artifacts"
)

var stagingScenarios = []scenario{
	{"Visibility", testStagingVisibility},
	{"DelimitedListing", testStagingDelimitedListing},
	{"DiffUncommitted", testStagingDiffUncommitted},
	{"ResetPrefix", testStagingResetPrefix},
	{"ResetAll", testStagingResetAll},
	{"CommitClearsStaging", testStagingCommitClears},
	{"NothingToCommit", testStagingNothingToCommit},
	{"AllowEmpty", testStagingAllowEmpty},
	{"CommitFields", testStagingCommitFields},
}

// stageOverCommitted commits keep.txt, change.txt and gone.txt on main,
// then stages an addition, a change and a removal on top.
func stageOverCommitted(f *fixture) artifacts.Commit {
	f.t.Helper()
	f.puts("main", "keep.txt", "keep", "change.txt", "v1", "gone.txt", "gone")
	c := f.commit("main", "base")
	f.puts("main", "new.txt", "new", "change.txt", "v2")
	f.del("main", "gone.txt")
	return c
}

func testStagingVisibility(f *fixture) {
	t := f.t
	c := stageOverCommitted(f)
	f.branch("other", "main")

	// The branch sees its staged changes.
	f.wantContents("main", "new.txt", "new", "change.txt", "v2")
	f.wantMissing("main", "gone.txt")
	wantSlice(t, "list main", f.listPaths("main", nil), []string{"change.txt", "keep.txt", "new.txt"})

	// Its last commit, another branch and the commit id do not.
	for _, ref := range []string{"main@", "other", c.ID} {
		f.wantMissing(ref, "new.txt")
		f.wantContents(ref, "change.txt", "v1", "gone.txt", "gone")
		wantSlice(t, "list "+ref, f.listPaths(ref, nil), []string{"change.txt", "gone.txt", "keep.txt"})
	}
	// Staging does not move the head.
	wantEqual(t, "main head while staging", f.head("main"), c.ID)
	f.wantResolve("main", c.ID)
	f.wantResolve("main@", c.ID)

	// Writes to the other branch stay there.
	f.put("other", "only-other.txt", "o")
	f.wantMissing("main", "only-other.txt")
	f.wantContent("other", "only-other.txt", "o")
}

// testStagingDelimitedListing checks that folding into common prefixes
// sees staged changes: a prefix whose only object is deleted disappears,
// a new one appears, on the branch but not at its last commit.
func testStagingDelimitedListing(f *fixture) {
	t := f.t
	f.puts("main", "a/only", "a", "b/one", "b", "b/two", "b", "c", "c")
	f.commit("main", "base")
	f.del("main", "a/only")
	f.del("main", "b/one")
	f.put("main", "d/new", "d")
	delim := &artifacts.ListOptions{Delimiter: "/"}
	wantSlice(t, "delimited list main", f.listPaths("main", delim), []string{"b/ (prefix)", "c", "d/ (prefix)"})
	wantSlice(t, "delimited list main@", f.listPaths("main@", delim), []string{"a/ (prefix)", "b/ (prefix)", "c"})
	wantSlice(t, "list main under a/", f.listPaths("main", &artifacts.ListOptions{Prefix: "a/", Delimiter: "/"}), []string{})
	wantSlice(t, "list main under b/", f.listPaths("main", &artifacts.ListOptions{Prefix: "b/", Delimiter: "/"}), []string{"b/two"})
	f.commit("main", "restructure")
	wantSlice(t, "delimited list main@ after commit", f.listPaths("main@", delim), []string{"b/ (prefix)", "c", "d/ (prefix)"})
}

func testStagingDiffUncommitted(f *fixture) {
	stageOverCommitted(f)
	f.wantChanges("diff uncommitted main", f.st.DiffUncommitted(f.ctx, "main"),
		"changed change.txt", "removed gone.txt", "added new.txt")

	// A staged object that is deleted again leaves no trace.
	f.put("main", "fleeting.txt", "x")
	f.del("main", "fleeting.txt")
	f.wantChanges("diff uncommitted after add and delete", f.st.DiffUncommitted(f.ctx, "main"),
		"changed change.txt", "removed gone.txt", "added new.txt")

	// Other branches have nothing staged.
	f.branch("clean", "main")
	f.wantChanges("diff uncommitted clean", f.st.DiffUncommitted(f.ctx, "clean"))

	_, err := collectErr(f.st.DiffUncommitted(f.ctx, "no-such-branch"))
	wantErr(f.t, "diff uncommitted of a missing branch", err, artifacts.ErrNotFound)
}

func testStagingResetPrefix(f *fixture) {
	t := f.t
	f.puts("main", "dir/old", "committed", "dir/removed", "committed", "dirty", "committed")
	c := f.commit("main", "base")
	f.puts("main", "dir/a", "a", "dir/b/c", "c", "dir/old", "changed")
	f.del("main", "dir/removed")
	f.puts("main", "dirty", "changed", "other/d", "d")

	if err := f.st.ResetBranch(f.ctx, "main", "dir/"); err != nil {
		t.Fatalf("reset main dir/: %v", err)
	}
	f.wantChanges("diff uncommitted after reset dir/", f.st.DiffUncommitted(f.ctx, "main"),
		"changed dirty", "added other/d")
	f.wantMissing("main", "dir/a")
	f.wantMissing("main", "dir/b/c")
	f.wantContents("main", "dir/old", "committed", "dir/removed", "committed", "dirty", "changed", "other/d", "d")
	wantEqual(t, "head after reset", f.head("main"), c.ID)
}

func testStagingResetAll(f *fixture) {
	t := f.t
	c := stageOverCommitted(f)
	f.put("main", "deep/er/x", "x")
	if err := f.st.ResetBranch(f.ctx, "main", ""); err != nil {
		t.Fatalf("reset main: %v", err)
	}
	f.wantChanges("diff uncommitted after reset", f.st.DiffUncommitted(f.ctx, "main"))
	f.wantMissing("main", "new.txt")
	f.wantMissing("main", "deep/er/x")
	f.wantContents("main", "change.txt", "v1", "gone.txt", "gone")
	wantSlice(t, "list after reset", f.listPaths("main", nil), []string{"change.txt", "gone.txt", "keep.txt"})
	wantEqual(t, "head after reset", f.head("main"), c.ID)

	// Resetting a clean branch is fine; a missing branch is not.
	if err := f.st.ResetBranch(f.ctx, "main", ""); err != nil {
		t.Fatalf("reset a clean branch: %v", err)
	}
	wantErr(t, "reset a missing branch", f.st.ResetBranch(f.ctx, "no-such-branch", ""), artifacts.ErrNotFound)
}

func testStagingCommitClears(f *fixture) {
	t := f.t
	base := stageOverCommitted(f)
	c := f.commit("main", "stage on top")
	f.wantChanges("diff uncommitted after commit", f.st.DiffUncommitted(f.ctx, "main"))
	wantEqual(t, "head after commit", f.head("main"), c.ID)
	wantSlice(t, "commit parents", c.Parents, []string{base.ID})
	for _, ref := range []string{"main", "main@", c.ID} {
		f.wantContents(ref, "new.txt", "new", "change.txt", "v2")
		f.wantMissing(ref, "gone.txt")
		f.wantContent(ref, "keep.txt", "keep")
	}
	// The previous commit is unchanged.
	f.wantContent(base.ID, "change.txt", "v1")
	f.wantContent(base.ID, "gone.txt", "gone")
	f.wantMissing(base.ID, "new.txt")
}

func testStagingNothingToCommit(f *fixture) {
	t := f.t
	_, err := f.st.Commit(f.ctx, "main", "nothing", nil)
	wantErr(t, "commit a clean fresh branch", err, artifacts.ErrNoChanges)

	f.putCommit("main", "a", "1")
	before := f.head("main")
	_, err = f.st.Commit(f.ctx, "main", "nothing again", nil)
	wantErr(t, "commit right after a commit", err, artifacts.ErrNoChanges)

	f.put("main", "b", "2")
	if err := f.st.ResetBranch(f.ctx, "main", ""); err != nil {
		t.Fatalf("reset: %v", err)
	}
	_, err = f.st.Commit(f.ctx, "main", "after reset", nil)
	wantErr(t, "commit after reset", err, artifacts.ErrNoChanges)
	wantEqual(t, "head after refused commits", f.head("main"), before)

	_, err = f.st.Commit(f.ctx, "no-such-branch", "x", &artifacts.CommitOptions{AllowEmpty: true})
	wantErr(t, "commit on a missing branch", err, artifacts.ErrNotFound)
}

func testStagingAllowEmpty(f *fixture) {
	t := f.t
	f.put("main", "a", "1")
	prev := f.commit("main", "a")
	c := f.commitWith("main", "checkpoint", &artifacts.CommitOptions{AllowEmpty: true})
	if c.ID == prev.ID {
		t.Fatalf("empty commit: same id as its parent %s", c.ID)
	}
	wantSlice(t, "empty commit parents", c.Parents, []string{prev.ID})
	wantEqual(t, "head after empty commit", f.head("main"), c.ID)
	wantEqual(t, "empty commit message", c.Message, "checkpoint")
	f.wantContent("main@", "a", "1")
	f.wantChanges("diff of an empty commit", f.st.Diff(f.ctx, prev.ID, c.ID, &artifacts.DiffOptions{TwoDot: true}))
}

func testStagingCommitFields(f *fixture) {
	t := f.t
	meta := map[string]string{"rlpipe-run": "run-7", "rlpipe-iteration": "3", "note": "a b=c"}
	f.put("main", "a", "1")
	c1 := f.commitWith("main", "iteration 3", &artifacts.CommitOptions{Metadata: meta})
	wantEqual(t, "commit message", c1.Message, "iteration 3")
	wantMap(t, "commit metadata", c1.Metadata, meta)
	wantSlice(t, "first commit parents", c1.Parents, []string{f.base.ID})
	if c1.CreationDate.IsZero() {
		t.Fatalf("commit: zero creation date")
	}
	if len(c1.ID) < 12 {
		t.Fatalf("commit id %q: shorter than 12 characters", c1.ID)
	}

	for _, how := range []struct {
		step string
		get  func() (artifacts.Commit, error)
	}{
		{"get commit", func() (artifacts.Commit, error) { return f.st.GetCommit(f.ctx, c1.ID) }},
		{"resolve commit id", func() (artifacts.Commit, error) { return f.st.ResolveRef(f.ctx, c1.ID) }},
		{"resolve branch", func() (artifacts.Commit, error) { return f.st.ResolveRef(f.ctx, "main") }},
	} {
		got, err := how.get()
		if err != nil {
			t.Fatalf("%s: %v", how.step, err)
		}
		wantEqual(t, how.step+": id", got.ID, c1.ID)
		wantEqual(t, how.step+": message", got.Message, "iteration 3")
		wantMap(t, how.step+": metadata", got.Metadata, meta)
		wantSlice(t, how.step+": parents", got.Parents, []string{f.base.ID})
		if !got.CreationDate.Equal(c1.CreationDate) {
			t.Fatalf("%s: creation date %v, want %v", how.step, got.CreationDate, c1.CreationDate)
		}
	}

	f.put("main", "b", "2")
	c2 := f.commit("main", "iteration 4")
	wantSlice(t, "second commit parents", c2.Parents, []string{c1.ID})
	wantMap(t, "commit without metadata", c2.Metadata, nil)
	if c2.ID == c1.ID {
		t.Fatalf("two commits share the id %s", c1.ID)
	}

	_, err := f.st.GetCommit(f.ctx, "0000000000000000000000000000000000000000000000000000000000000000")
	wantErr(t, "get a missing commit", err, artifacts.ErrNotFound)
}
