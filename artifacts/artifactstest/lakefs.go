package artifactstest

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
)

// ServeLakeFS serves st as a lakeFS (a storeserver.Server with opts on a
// loopback test server) and opens it with the lakefs:// backend, with the
// credentials opts gives. It returns the client store, the server and the
// server's base URL; all close when the test ends.
func ServeLakeFS(t testing.TB, st artifacts.Store, opts *storeserver.Options) (*lakefs.Store, *storeserver.Server, string) {
	t.Helper()
	ctx := context.Background()
	srv, err := storeserver.New(ctx, st, opts)
	if err != nil {
		t.Fatalf("serve the store as a lakeFS: %v", err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	var key, secret string
	if opts != nil {
		key, secret = opts.AccessKeyID, opts.SecretAccessKey
	}
	c, err := lakefs.NewClient(lakefs.Config{Endpoint: hs.URL, AccessKeyID: key, SecretAccessKey: secret})
	if err != nil {
		t.Fatalf("new lakeFS client for %s: %v", hs.URL, err)
	}
	client, err := lakefs.Open(ctx, c, srv.Repository(), nil)
	if err != nil {
		t.Fatalf("open lakefs://%s at %s: %v", srv.Repository(), hs.URL, err)
	}
	t.Cleanup(func() { client.Close() })
	return client, srv, hs.URL
}
