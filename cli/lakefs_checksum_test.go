package cli

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
)

// servedWithMD5 serves h's embedded store as a lakeFS whose checksums are
// MD5s, as lakeFS's local block store reports them, and returns a harness
// that reaches it through the lakeFS backend. stop closes the server and
// the store, so that h can open the store directly again; until then,
// backing is the served store, for a test that plants what a lakeFS
// would hold.
func servedWithMD5(t *testing.T, h *harness) (remote *harness, backing *local.Store, stop func()) {
	t.Helper()
	ctx := context.Background()
	st, err := local.Open(ctx, h.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := storeserver.New(ctx, st, &storeserver.Options{Faults: storeserver.Faults{MD5Checksums: true}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Setenv(lakefs.EnvEndpoint, hs.URL)
	t.Setenv(lakefs.EnvAccessKeyID, "")
	t.Setenv(lakefs.EnvSecretAccessKey, "")
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			hs.Close()
			st.Close()
		}
	}
	t.Cleanup(stop)
	return &harness{t: t, dir: h.dir, store: "lakefs://" + srv.Repository(), env: map[string]string{}}, st, stop
}

// The small arithmetic loop run through the lakeFS backend, on a lakeFS
// that reports MD5 checksums, then run again on the same data through the
// embedded store under another name: every task is a cache hit, because
// the lakeFS backend reports the SHA-256 it recorded with each object it
// wrote, which is the embedded store's checksum of the same bytes.
func TestCacheHitsAfterMovingFromLakeFSToTheEmbeddedStore(t *testing.T) {
	src := smallArithConfig(t)
	h := newStore(t)
	cfg := h.file("pipeline.yaml", src)
	remote, _, stop := servedWithMD5(t, h)
	remote.ok("dataset", "arith", "main", "--train", "256", "--heldout", "50")
	var first runOut
	remote.json(&first, "run", "-f", cfg, "--no-report")
	if first.Run != "arith" || first.Iterations != 4 || first.Tasks != 30 || first.Cached != 0 || first.Attempts != 30 {
		t.Fatalf("run through lakeFS: %+v", first)
	}
	stop()

	var again runOut
	h.json(&again, "run", "-f", cfg, "--run", "arith-again", "--no-report")
	if again.Iterations != 4 || again.Tasks != first.Tasks || again.Cached != first.Tasks || again.Attempts != 0 || again.ConfigHash != first.ConfigHash {
		t.Fatalf("the same run on the embedded store: %d tasks, %d cached, %d attempts; want all %d cached (%+v)",
			again.Tasks, again.Cached, again.Attempts, first.Tasks, again)
	}
	out := h.ok("diff", "runs-arith", "runs-arith-again", "--two-dot", "--prefix", "iterations/")
	if strings.TrimSpace(out) != "" && !strings.Contains(out, "no changes") {
		t.Errorf("the run from the cache differs:\n%s", out)
	}
}

// The other way, the data is written by the embedded store, which records
// no SHA-256 beside its own checksum: through a lakeFS that reports MD5s,
// those objects have MD5 checksums, so no cache key of the first run
// matches and every task runs again. (A real lakeFS holds such data only
// if something copied it there; copied through the lakeFS backend from
// files, it would carry recorded SHA-256s and hit.) The served run still
// produces the same artifacts.
func TestCacheMissesAfterMovingFromTheEmbeddedStoreToAnMD5LakeFS(t *testing.T) {
	src := smallArithConfig(t)
	h := newStore(t)
	cfg := h.file("pipeline.yaml", src)
	h.ok("dataset", "arith", "main", "--train", "256", "--heldout", "50")
	var first runOut
	h.json(&first, "run", "-f", cfg, "--no-report")
	if first.Iterations != 4 || first.Tasks != 30 || first.Cached != 0 || first.Attempts != 30 {
		t.Fatalf("run on the embedded store: %+v", first)
	}

	remote, _, stop := servedWithMD5(t, h)
	var again runOut
	remote.json(&again, "run", "-f", cfg, "--run", "arith-again", "--no-report")
	if again.Iterations != 4 || again.Tasks != first.Tasks || again.Cached != 0 || again.Attempts != first.Tasks {
		t.Fatalf("the same run through lakeFS: %d tasks, %d cached, %d attempts; want all %d run again (%+v)",
			again.Tasks, again.Cached, again.Attempts, first.Tasks, again)
	}
	stop()
	// Run again, the tasks wrote new object versions (their provenance
	// names MD5 input checksums): the bytes are the same.
	st := h.openStore()
	want, got := iterationChecksums(t, st, "arith"), iterationChecksums(t, st, "arith-again")
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("%d artifacts through lakeFS, %d on the embedded store", len(got), len(want))
	}
	for p, sum := range want {
		if got[p] != sum {
			t.Errorf("%s differs through lakeFS", p)
		}
	}
}

// iterationChecksums maps each artifact under iterations/ of a run's
// branch to its checksum.
func iterationChecksums(t *testing.T, st artifacts.Store, run string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for e, err := range st.ListObjects(context.Background(), runs.Branch(run), &artifacts.ListOptions{Prefix: "iterations/"}) {
		if err != nil {
			t.Fatal(err)
		}
		m[e.Path] = e.Checksum
	}
	return m
}
