package artifactstest

import (
	"github.com/rlpipe/rlpipe/artifacts"
)

var tagScenarios = []scenario{
	{"CreateGetList", testTagCreateGetList},
	{"Exists", testTagExists},
	{"Delete", testTagDelete},
	{"ReadThrough", testTagReadThrough},
	{"Invalid", testTagInvalid},
}

func testTagCreateGetList(f *fixture) {
	t := f.t
	c1 := f.putCommit("main", "a", "1")
	c2 := f.putCommit("main", "b", "2")
	cases := []struct{ name, ref, want string }{
		{"v2", "main", c2.ID},
		{"v1.0", c1.ID, c1.ID},
		{"release-1", "main~1", c1.ID},
		{"also-v2", "v2", c2.ID},
		{"prefix-tag", c2.ID[:12], c2.ID},
	}
	for _, c := range cases {
		tag, err := f.st.CreateTag(f.ctx, c.name, c.ref)
		if err != nil {
			t.Fatalf("create tag %s at %s: %v", c.name, c.ref, err)
		}
		wantEqual(t, "create tag "+c.name+": name", tag.Name, c.name)
		wantEqual(t, "create tag "+c.name+": commit", tag.CommitID, c.want)
		got, err := f.st.GetTag(f.ctx, c.name)
		if err != nil {
			t.Fatalf("get tag %s: %v", c.name, err)
		}
		wantEqual(t, "get tag "+c.name+": commit", got.CommitID, c.want)
		f.wantResolve(c.name, c.want)
	}
	// A tag does not move with its branch.
	f.putCommit("main", "c", "3")
	f.wantResolve("v2", c2.ID)

	var got []string
	for _, tag := range collect(t, "list tags", f.st.ListTags(f.ctx)) {
		got = append(got, tag.Name+"="+tag.CommitID)
	}
	wantSlice(t, "list tags", got, []string{
		"also-v2=" + c2.ID, "prefix-tag=" + c2.ID, "release-1=" + c1.ID, "v1.0=" + c1.ID, "v2=" + c2.ID,
	})
}

func testTagExists(f *fixture) {
	t := f.t
	c1 := f.putCommit("main", "a", "1")
	f.putCommit("main", "a", "2")
	if _, err := f.st.CreateTag(f.ctx, "v1", c1.ID); err != nil {
		t.Fatalf("create tag: %v", err)
	}
	_, err := f.st.CreateTag(f.ctx, "v1", "main")
	wantErr(t, "create an existing tag", err, artifacts.ErrTagExists)
	f.wantResolve("v1", c1.ID)
}

func testTagDelete(f *fixture) {
	t := f.t
	c := f.putCommit("main", "a", "1")
	if _, err := f.st.CreateTag(f.ctx, "v1", "main"); err != nil {
		t.Fatalf("create tag: %v", err)
	}
	if err := f.st.DeleteTag(f.ctx, "v1"); err != nil {
		t.Fatalf("delete tag: %v", err)
	}
	_, err := f.st.GetTag(f.ctx, "v1")
	wantErr(t, "get a deleted tag", err, artifacts.ErrTagNotFound)
	_, err = f.st.ResolveRef(f.ctx, "v1")
	wantErr(t, "resolve a deleted tag", err, artifacts.ErrNotFound)
	wantErr(t, "delete a deleted tag", f.st.DeleteTag(f.ctx, "v1"), artifacts.ErrTagNotFound)
	if tags := collect(t, "list tags", f.st.ListTags(f.ctx)); len(tags) != 0 {
		t.Fatalf("list tags after delete: got %v, want none", tags)
	}
	// The commit is still there, and the name can be used again.
	f.wantContent(c.ID, "a", "1")
	if _, err := f.st.CreateTag(f.ctx, "v1", f.base.ID); err != nil {
		t.Fatalf("create the tag again: %v", err)
	}
	f.wantResolve("v1", f.base.ID)
}

func testTagReadThrough(f *fixture) {
	t := f.t
	f.puts("main", "data/a", "a1", "data/b", "b1")
	c := f.commit("main", "v1 data")
	if _, err := f.st.CreateTag(f.ctx, "v1", "main"); err != nil {
		t.Fatalf("create tag: %v", err)
	}
	f.put("main", "data/a", "a2")
	f.del("main", "data/b")
	f.put("main", "data/c", "c")
	f.commit("main", "v2 data")
	f.put("main", "data/d", "staged")

	f.wantContents("v1", "data/a", "a1", "data/b", "b1")
	f.wantMissing("v1", "data/c")
	f.wantMissing("v1", "data/d")
	wantSlice(t, "list v1", f.listPaths("v1", &artifacts.ListOptions{Prefix: "data/"}), []string{"data/a", "data/b"})
	wantEqual(t, "stat v1: size", f.stat("v1", "data/a").Size, int64(2))
	f.wantResolve("v1", c.ID)
	f.wantResolve("v1~1", f.base.ID)
	wantSlice(t, "log v1", f.log("v1", nil), []string{c.ID, f.base.ID})
	f.wantChanges("diff v1..main", f.st.Diff(f.ctx, "v1", "main@", &artifacts.DiffOptions{TwoDot: true}),
		"changed data/a", "removed data/b", "added data/c")
}

func testTagInvalid(f *fixture) {
	t := f.t
	// Only names lakeFS itself refuses: unlike git, it allows '~'.
	for _, name := range []string{"", "has space", "a..b", "y^", "z:w", "ends.", "x.lock", "@"} {
		_, err := f.st.CreateTag(f.ctx, name, "main")
		wantErr(t, "create tag "+quote(name), err, artifacts.ErrInvalid)
	}
	_, err := f.st.CreateTag(f.ctx, "v1", "no-such-ref")
	wantErr(t, "create a tag at a missing ref", err, artifacts.ErrNotFound)
	if tags := collect(t, "list tags", f.st.ListTags(f.ctx)); len(tags) != 0 {
		t.Fatalf("list tags after refused creates: got %v, want none", tags)
	}
}
