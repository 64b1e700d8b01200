package artifactstest

import (
	"github.com/rlpipe/rlpipe/artifacts"
)

var branchScenarios = []scenario{
	{"CreateFromRef", testBranchCreateFromRef},
	{"Exists", testBranchExists},
	{"UnknownSource", testBranchUnknownSource},
	{"ListInNameOrder", testBranchList},
	{"Delete", testBranchDelete},
	{"DeleteWithStagedChanges", testBranchDeleteStaged},
	{"DeleteDefault", testBranchDeleteDefault},
	{"InvalidName", testBranchInvalidName},
}

func testBranchCreateFromRef(f *fixture) {
	t := f.t
	f.put("main", "data/a", "a1")
	c1 := f.commit("main", "a1")
	f.put("main", "data/b", "b")
	c2 := f.commit("main", "b")
	if _, err := f.st.CreateTag(f.ctx, "first", c1.ID); err != nil {
		t.Fatalf("create tag: %v", err)
	}
	f.put("main", "data/staged", "s") // not part of any commit

	cases := []struct{ name, from, head string }{
		{"from-branch", "main", c2.ID},
		{"from-commit", c1.ID, c1.ID},
		{"from-tag", "first", c1.ID},
		{"from-ancestor", "main~1", c1.ID},
		{"from-branch-committed", "main@", c2.ID},
	}
	for _, c := range cases {
		b := f.branch(c.name, c.from)
		wantEqual(t, "create "+c.name+": name", b.Name, c.name)
		wantEqual(t, "create "+c.name+": head", b.CommitID, c.head)
		wantEqual(t, "get "+c.name+": head", f.head(c.name), c.head)
		f.wantResolve(c.name, c.head)
		f.wantContent(c.name, "data/a", "a1")
		f.wantMissing(c.name, "data/staged") // staged changes are not copied
		f.wantChanges("diff uncommitted "+c.name, f.st.DiffUncommitted(f.ctx, c.name))
		f.wantChanges("diff "+c.head+".."+c.name, f.st.Diff(f.ctx, c.head, c.name, &artifacts.DiffOptions{TwoDot: true}))
	}
	wantSlice(t, "list from-branch", f.listPaths("from-branch", nil), []string{"data/a", "data/b"})
	wantSlice(t, "list from-commit", f.listPaths("from-commit", nil), []string{"data/a"})

	// Branches move independently.
	f.put("from-commit", "data/a", "a2")
	f.commit("from-commit", "a2")
	f.wantContent("from-commit", "data/a", "a2")
	f.wantContent("main", "data/a", "a1")
	f.wantContent("first", "data/a", "a1")
	wantEqual(t, "main head after committing elsewhere", f.head("main"), c2.ID)
}

func testBranchExists(f *fixture) {
	t := f.t
	f.putCommit("main", "a", "1")
	b := f.branch("dev", "main")
	f.putCommit("dev", "b", "2")
	_, err := f.st.CreateBranch(f.ctx, "dev", "main")
	wantErr(t, "create an existing branch", err, artifacts.ErrBranchExists)
	_, err = f.st.CreateBranch(f.ctx, "main", "dev")
	wantErr(t, "create the default branch again", err, artifacts.ErrBranchExists)
	if got := f.head("dev"); got == b.CommitID {
		t.Fatalf("dev head: the refused create moved it back to %s", got)
	}
	f.wantContent("dev", "b", "2")
}

func testBranchUnknownSource(f *fixture) {
	t := f.t
	for _, from := range []string{"no-such-branch", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "main~5", "no-such-branch@"} {
		_, err := f.st.CreateBranch(f.ctx, "dev", from)
		wantErr(t, "create branch from "+from, err, artifacts.ErrNotFound)
	}
	f.wantNoBranch("get a branch whose creation failed", "dev")
}

func testBranchList(f *fixture) {
	t := f.t
	for _, name := range []string{"zeta", "alpha", "mid-1", "b_2", "Upper"} {
		f.branch(name, "main")
	}
	f.putCommit("alpha", "x", "1")
	branches := collect(t, "list branches", f.st.ListBranches(f.ctx))
	var names []string
	for _, b := range branches {
		names = append(names, b.Name)
		wantEqual(t, "list branches: head of "+b.Name, b.CommitID, f.head(b.Name))
	}
	wantSlice(t, "list branches", names, []string{"Upper", "alpha", "b_2", "main", "mid-1", "zeta"})
}

func testBranchDelete(f *fixture) {
	t := f.t
	f.putCommit("main", "a", "1")
	f.branch("dev", "main")
	f.putCommit("dev", "committed", "c")
	f.deleteBranch("delete dev", "dev")
	f.wantNoBranch("get a deleted branch", "dev")
	_, _, err := readObject(f.ctx, f.st, "dev", "a")
	wantErr(t, "read through a deleted branch", err, artifacts.ErrNotFound)
	wantErr(t, "delete a deleted branch", f.st.DeleteBranch(f.ctx, "dev"), artifacts.ErrBranchNotFound)
	wantSlice(t, "list after delete", branchNames(f), []string{"main"})

	// A branch created again under the same name starts from its new source.
	f.branch("dev", "main")
	f.wantMissing("dev", "committed")
	f.wantContent("dev", "a", "1")
}

// testBranchDeleteStaged deletes a branch with staged changes, which
// lakeFS allows: the staged changes go with it.
func testBranchDeleteStaged(f *fixture) {
	f.putCommit("main", "a", "1")
	f.branch("dev", "main")
	f.put("dev", "staged", "s")
	f.deleteBranch("delete a branch with staged changes", "dev")
	f.wantNoBranch("get a deleted branch", "dev")
	f.branch("dev", "main")
	f.wantMissing("dev", "staged")
	f.wantChanges("diff uncommitted of the new dev", f.st.DiffUncommitted(f.ctx, "dev"))
}

func testBranchDeleteDefault(f *fixture) {
	t := f.t
	err := f.st.DeleteBranch(f.ctx, "main")
	// lakeFS refuses with 400 or 403 depending on the version; the
	// embedded store says ErrProtected (an ErrConflict).
	wantErr(t, "delete the default branch", err, artifacts.ErrProtected, artifacts.ErrConflict, artifacts.ErrInvalid)
	wantEqual(t, "default branch after refused delete", f.head("main"), f.base.ID)
}

func testBranchInvalidName(f *fixture) {
	t := f.t
	for _, name := range []string{"a/b", "", "-dash", "has space", "dot.ted"} {
		_, err := f.st.CreateBranch(f.ctx, name, "main")
		wantErr(t, "create branch "+quote(name), err, artifacts.ErrInvalid)
	}
	wantSlice(t, "list after invalid creates", branchNames(f), []string{"main"})
}

func branchNames(f *fixture) []string {
	f.t.Helper()
	var names []string
	for _, b := range collect(f.t, "list branches", f.st.ListBranches(f.ctx)) {
		names = append(names, b.Name)
	}
	return names
}
