package artifactstest

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
)

// ServeLakeFS serves st as a lakeFS (Serve) and opens it with the
// lakefs:// backend (OpenLakeFS), with the credentials opts gives. It
// returns the client store, the server and the server's base URL; all
// close when the test ends.
func ServeLakeFS(t testing.TB, st artifacts.Store, opts *storeserver.Options) (*lakefs.Store, *storeserver.Server, string) {
	t.Helper()
	srv, url := Serve(t, st, opts)
	var key, secret string
	if opts != nil {
		key, secret = opts.AccessKeyID, opts.SecretAccessKey
	}
	return OpenLakeFS(t, url, srv.Repository(), key, secret), srv, url
}

// Serve serves st as a lakeFS: a storeserver.Server with opts on a
// loopback test server. It returns the server and its base URL; the test
// server closes when the test ends.
func Serve(t testing.TB, st artifacts.Store, opts *storeserver.Options) (*storeserver.Server, string) {
	t.Helper()
	srv, err := storeserver.New(context.Background(), st, opts)
	if err != nil {
		t.Fatalf("serve the store as a lakeFS: %v", err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return srv, hs.URL
}

// OpenLakeFS opens the repository repo of the lakeFS at url with the
// lakefs:// backend and the credentials key and secret; the store closes
// when the test ends.
func OpenLakeFS(t testing.TB, url, repo, key, secret string) *lakefs.Store {
	t.Helper()
	return OpenLakeFSWith(t, lakefs.Config{Endpoint: url, AccessKeyID: key, SecretAccessKey: secret}, repo, nil)
}

// OpenLakeFSWith opens the repository repo of the lakeFS cfg names with
// the lakefs:// backend and opts; the store closes when the test ends.
func OpenLakeFSWith(t testing.TB, cfg lakefs.Config, repo string, opts *artifacts.Options) *lakefs.Store {
	t.Helper()
	c, err := lakefs.NewClient(cfg)
	if err != nil {
		t.Fatalf("new lakeFS client for %s: %v", cfg.Endpoint, err)
	}
	st, err := lakefs.Open(context.Background(), c, repo, opts)
	if err != nil {
		t.Fatalf("open lakefs://%s at %s: %v", repo, cfg.Endpoint, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// ServeBlockStore makes a storeserver.BlockStore with opts (Dir a
// temporary directory unless set) served by a loopback test server of
// its own, standing in for the S3 beside a lakeFS server: give it to
// Serve as Options.BlockStore. The test server closes when the test ends.
func ServeBlockStore(t testing.TB, opts storeserver.BlockStoreOptions) *storeserver.BlockStore {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	bs, err := storeserver.NewBlockStore(opts)
	if err != nil {
		t.Fatalf("block store: %v", err)
	}
	hs := httptest.NewServer(bs)
	t.Cleanup(hs.Close)
	bs.SetURL(hs.URL)
	return bs
}
