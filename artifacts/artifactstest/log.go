package artifactstest

import (
	"github.com/rlpipe/rlpipe/artifacts"
)

var logScenarios = []scenario{
	{"NewestFirst", testLogNewestFirst},
	{"Limit", testLogLimit},
	{"FirstParent", testLogFirstParent},
	{"Paths", testLogPaths},
	{"Prefixes", testLogPrefixes},
	{"FromTagAndCommit", testLogFromTagAndCommit},
}

func testLogNewestFirst(f *fixture) {
	t := f.t
	c1 := f.putCommit("main", "a", "1")
	c2 := f.putCommit("main", "b", "2")
	c3 := f.putCommit("main", "c", "3")
	f.put("main", "d", "staged")
	want := []string{c3.ID, c2.ID, c1.ID, f.base.ID}
	wantSlice(t, "log main", f.log("main", nil), want)
	wantSlice(t, "log main@", f.log("main@", nil), want)
	wantSlice(t, "log main~1", f.log("main~1", nil), want[1:])

	commits := collect(t, "log main", f.st.Log(f.ctx, "main", nil))
	wantEqual(t, "log: message of the newest", commits[0].Message, c3.Message)
	wantSlice(t, "log: parents of the newest", commits[0].Parents, []string{c2.ID})
	if len(commits[3].Parents) != 0 {
		t.Fatalf("log: the initial commit has parents %v", commits[3].Parents)
	}

	_, err := collectErr(f.st.Log(f.ctx, "no-such-ref", nil))
	wantErr(t, "log of a missing ref", err, artifacts.ErrNotFound)
}

func testLogLimit(f *fixture) {
	t := f.t
	var ids []string
	for i := range 5 {
		ids = append([]string{f.putCommit("main", "a", itoa(i)).ID}, ids...)
	}
	wantSlice(t, "log limit 2", f.log("main", &artifacts.LogOptions{Limit: 2}), ids[:2])
	wantSlice(t, "log limit 5", f.log("main", &artifacts.LogOptions{Limit: 5}), ids)
	wantSlice(t, "log limit 100", f.log("main", &artifacts.LogOptions{Limit: 100}), append(ids, f.base.ID))

	// Stopping the iteration early is allowed.
	n := 0
	for _, err := range f.st.Log(f.ctx, "main", nil) {
		if err != nil {
			t.Fatalf("log: %v", err)
		}
		n++
		if n == 2 {
			break
		}
	}
	wantEqual(t, "commits seen before break", n, 2)
}

// mergedHistory builds
//
//	base ── m1 ──────── merge (main)
//	  └── f1 ── f2 ──┘  (feature)
//
// and returns the commits; it skips the test without a Merger.
func mergedHistory(f *fixture) (m1, f1, f2, merge artifacts.Commit) {
	f.t.Helper()
	m := merger(f)
	f.branch("feature", "main")
	f1 = f.putCommit("feature", "feature/one", "1")
	f2 = f.putCommit("feature", "feature/two", "2")
	m1 = f.putCommit("main", "main/one", "1")
	merge, err := m.Merge(f.ctx, "feature", "main", &artifacts.MergeOptions{Message: "merge feature"})
	if err != nil {
		f.t.Fatalf("merge feature into main: %v", err)
	}
	return m1, f1, f2, merge
}

func testLogFirstParent(f *fixture) {
	t := f.t
	m1, f1, f2, merge := mergedHistory(f)
	wantSlice(t, "log first parent", f.log("main", &artifacts.LogOptions{FirstParent: true}),
		[]string{merge.ID, m1.ID, f.base.ID})

	// The full log holds every commit once, the merge first. The order
	// between the two lines of history is the backend's: lakeFS orders by
	// date, with ties (within a second) broken by id, so even the initial
	// commit may come before a commit of the other line. A commit on
	// one line still comes before its parent on the same line: f2 before f1.
	all := f.log("main", nil)
	if len(all) != 5 || all[0] != merge.ID {
		t.Fatalf("log: got %v, want 5 commits starting with %s", all, merge.ID)
	}
	wantSet(t, "log: commits", all, []string{merge.ID, m1.ID, f1.ID, f2.ID, f.base.ID})
	if indexOf(all, f2.ID) > indexOf(all, f1.ID) {
		t.Fatalf("log: %s listed after its parent %s: %v", f2.ID, f1.ID, all)
	}
	wantSlice(t, "log of the feature line", f.log("main^2", nil), []string{f2.ID, f1.ID, f.base.ID})
}

func testLogPaths(f *fixture) {
	t := f.t
	c1 := f.putCommit("main", "data/a", "1")
	f.putCommit("main", "data/b", "1")
	c3 := f.putCommit("main", "data/a", "2")
	f.putCommit("main", "other/c", "1")
	f.del("main", "data/a")
	c5 := f.commit("main", "remove a")
	f.commitWith("main", "empty", &artifacts.CommitOptions{AllowEmpty: true})

	wantSlice(t, "log of data/a", f.log("main", &artifacts.LogOptions{Paths: []string{"data/a"}}),
		[]string{c5.ID, c3.ID, c1.ID})
	wantSlice(t, "log of data/a with limit", f.log("main", &artifacts.LogOptions{Paths: []string{"data/a"}, Limit: 2}),
		[]string{c5.ID, c3.ID})
	wantSlice(t, "log of a path never written", f.log("main", &artifacts.LogOptions{Paths: []string{"data/zz"}}),
		[]string{})
	// A path is exact: "data/" names no object.
	wantSlice(t, "log of the path data/", f.log("main", &artifacts.LogOptions{Paths: []string{"data/"}}),
		[]string{})
}

func testLogPrefixes(f *fixture) {
	t := f.t
	c1 := f.putCommit("main", "data/a", "1")
	c2 := f.putCommit("main", "other/x", "1")
	c3 := f.putCommit("main", "data/sub/b", "1")
	f.putCommit("main", "database", "1")
	c5 := f.putCommit("main", "other/y", "1")

	wantSlice(t, "log of data/", f.log("main", &artifacts.LogOptions{Prefixes: []string{"data/"}}),
		[]string{c3.ID, c1.ID})
	wantSlice(t, "log of data/sub/", f.log("main", &artifacts.LogOptions{Prefixes: []string{"data/sub/"}}),
		[]string{c3.ID})
	wantSlice(t, "log of other/", f.log("main", &artifacts.LogOptions{Prefixes: []string{"other/"}}),
		[]string{c5.ID, c2.ID})
	wantSlice(t, "log of data/ or other/x", f.log("main", &artifacts.LogOptions{Prefixes: []string{"data/"}, Paths: []string{"other/x"}}),
		[]string{c3.ID, c2.ID, c1.ID})
	wantSlice(t, "log of data/ and other/", f.log("main", &artifacts.LogOptions{Prefixes: []string{"data/", "other/"}}),
		[]string{c5.ID, c3.ID, c2.ID, c1.ID})
}

func testLogFromTagAndCommit(f *fixture) {
	t := f.t
	c1 := f.putCommit("main", "a", "1")
	c2 := f.putCommit("main", "a", "2")
	f.putCommit("main", "a", "3")
	if _, err := f.st.CreateTag(f.ctx, "v2", c2.ID); err != nil {
		t.Fatalf("create tag: %v", err)
	}
	want := []string{c2.ID, c1.ID, f.base.ID}
	wantSlice(t, "log of a tag", f.log("v2", nil), want)
	wantSlice(t, "log of a commit id", f.log(c2.ID, nil), want)
	wantSlice(t, "log of a commit prefix", f.log(c2.ID[:12], nil), want)
	wantSlice(t, "log of a tag with limit", f.log("v2", &artifacts.LogOptions{Limit: 1}), want[:1])
}
