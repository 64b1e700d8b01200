package artifactstest

import (
	"errors"

	"github.com/rlpipe/rlpipe/artifacts"
)

var gcScenarios = []scenario{
	{"RemovesUnreachable", testGCRemovesUnreachable},
	{"KeepsReachable", testGCKeepsReachable},
	{"DryRun", testGCDryRun},
}

var noGrace = &artifacts.GCOptions{GracePeriod: -1}

// collector returns the store's Collector or skips the test; a store that
// implements it but answers ErrNotSupported (a lakeFS server, which
// collects on its own schedule) is skipped too.
func collector(f *fixture) artifacts.Collector { return ability[artifacts.Collector](f) }

func (f *fixture) gc(c artifacts.Collector, opts *artifacts.GCOptions) artifacts.GCResult {
	f.t.Helper()
	res, err := c.GC(f.ctx, opts)
	if errors.Is(err, artifacts.ErrNotSupported) {
		f.t.Skipf("garbage collection: %v", err)
	}
	if err != nil {
		f.t.Fatalf("garbage collection: %v", err)
	}
	return res
}

// unreachable commits a unique object on a branch and deletes the branch,
// returning the commit that alone still reaches it.
func unreachable(f *fixture) artifacts.Commit {
	f.t.Helper()
	f.putCommit("main", "shared.txt", "kept on main")
	f.branch("scratch", "main")
	f.put("scratch", "scratch/unique.bin", "only the deleted branch had these bytes")
	c := f.commit("scratch", "scratch work")
	f.deleteBranch("delete scratch", "scratch")
	return c
}

func testGCRemovesUnreachable(f *fixture) {
	t := f.t
	c := collector(f)
	unreachable(f)
	res := f.gc(c, noGrace)
	if res.BlobsRemoved < 1 {
		t.Fatalf("gc after deleting a branch: removed %d blobs, want at least 1 (%+v)", res.BlobsRemoved, res)
	}
	if res.BytesRemoved <= 0 {
		t.Fatalf("gc after deleting a branch: removed %d bytes, want some (%+v)", res.BytesRemoved, res)
	}
	f.wantContent("main", "shared.txt", "kept on main")
	f.wantContent("main@", "shared.txt", "kept on main")

	// A second collection finds nothing more.
	again := f.gc(c, noGrace)
	wantEqual(t, "second gc: blobs removed", again.BlobsRemoved, 0)
}

func testGCKeepsReachable(f *fixture) {
	t := f.t
	c := collector(f)
	unreachable(f)

	// Reachable from a tag only.
	f.branch("tagged", "main")
	f.putCommit("tagged", "tagged.bin", "reachable from a tag")
	if _, err := f.st.CreateTag(f.ctx, "keep", "tagged"); err != nil {
		t.Fatalf("create tag: %v", err)
	}
	f.deleteBranch("delete tagged", "tagged")
	// Reachable from an old commit of a live branch only.
	f.putCommit("main", "history.bin", "in history")
	f.del("main", "history.bin")
	f.commit("main", "drop history.bin")
	// Staged only, on main and on another branch.
	f.put("main", "staged.bin", "reachable from staging")
	f.branch("wip", "main")
	f.put("wip", "wip.bin", "staged on wip")

	res := f.gc(c, noGrace)
	if res.BlobsRemoved < 1 {
		t.Fatalf("gc: removed %d blobs, want at least the deleted branch's (%+v)", res.BlobsRemoved, res)
	}
	f.wantContent("keep", "tagged.bin", "reachable from a tag")
	f.wantContent("main", "staged.bin", "reachable from staging")
	f.wantContent("wip", "wip.bin", "staged on wip")
	f.wantContent("main~1", "history.bin", "in history")
	f.wantContent("main", "shared.txt", "kept on main")
	f.commit("main", "commit the staged object after gc")
	f.wantContent("main@", "staged.bin", "reachable from staging")
}

func testGCDryRun(f *fixture) {
	t := f.t
	c := collector(f)
	lost := unreachable(f)
	dry := f.gc(c, &artifacts.GCOptions{GracePeriod: -1, DryRun: true})
	if dry.BlobsRemoved < 1 {
		t.Fatalf("dry-run gc: reports %d blobs, want at least 1 (%+v)", dry.BlobsRemoved, dry)
	}
	// Nothing was removed: the deleted branch's commit still reads.
	f.wantContent(lost.ID, "scratch/unique.bin", "only the deleted branch had these bytes")
	res := f.gc(c, noGrace)
	wantEqual(t, "gc after a dry run: blobs removed", res.BlobsRemoved, dry.BlobsRemoved)
	wantEqual(t, "gc after a dry run: bytes removed", res.BytesRemoved, dry.BytesRemoved)
	f.wantContent("main", "shared.txt", "kept on main")
}
