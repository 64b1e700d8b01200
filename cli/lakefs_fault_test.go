package cli

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
	"github.com/rlpipe/rlpipe/pipeline"
)

// The overlapped arithmetic loop with evaluations, run through the
// lakeFS backend against a store server that misses the first read of
// every staged object (as lakeFS does to a read racing a commit),
// finishes without a rerun and writes exactly the artifacts of the same
// run on the embedded store.
func TestArithmeticRunThroughALakeFSThatMissesStagedReads(t *testing.T) {
	ctx := context.Background()
	src := smallArithConfig(t)
	direct := newStore(t)
	direct.ok("dataset", "arith", "main", "--train", "256", "--heldout", "50")
	direct.ok("run", "-f", direct.file("pipeline.yaml", src), "--no-report")

	served := newStore(t)
	served.ok("dataset", "arith", "main", "--train", "256", "--heldout", "50")
	cfg := served.file("pipeline.yaml", src)
	st, err := local.Open(ctx, served.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := storeserver.New(ctx, st, &storeserver.Options{Faults: storeserver.Faults{MissStagedOnce: true}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	t.Setenv(lakefs.EnvEndpoint, hs.URL)
	t.Setenv(lakefs.EnvAccessKeyID, "")
	t.Setenv(lakefs.EnvSecretAccessKey, "")
	remote := &harness{t: t, dir: served.dir, store: "lakefs://" + srv.Repository(), env: map[string]string{}}
	out := remote.ok("run", "-f", cfg, "--no-report")
	if !strings.Contains(out, "iteration 4 of 4 committed") {
		t.Fatalf("run through lakeFS:\n%s", out)
	}

	sums := func(st artifacts.Store) map[string]string {
		m := map[string]string{}
		for e, err := range st.ListObjects(ctx, pipeline.RunBranch("arith"), nil) {
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(e.Path, "iterations/") || strings.HasPrefix(e.Path, "evals/") {
				m[e.Path] = e.Checksum
			}
		}
		return m
	}
	d, err := local.Open(ctx, direct.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	want, got := sums(d), sums(st)
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("%d artifacts through lakeFS, %d direct", len(got), len(want))
	}
	for p, sum := range want {
		if got[p] != sum {
			t.Errorf("%s differs through lakeFS", p)
		}
	}
}
