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
	c, err := lakefs.NewClient(lakefs.Config{Endpoint: url, AccessKeyID: key, SecretAccessKey: secret})
	if err != nil {
		t.Fatalf("new lakeFS client for %s: %v", url, err)
	}
	st, err := lakefs.Open(context.Background(), c, repo, nil)
	if err != nil {
		t.Fatalf("open lakefs://%s at %s: %v", repo, url, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
