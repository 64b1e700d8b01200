package storeserver_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
)

const (
	testKey    = "AKIASTORESERVERTEST1"
	testSecret = "c2VjcmV0LXN0b3Jlc2VydmVyLXRlc3Qtc2VjcmV0"
	// testRepo is the repository name of stores newLocal creates: the
	// embedded store is named after its directory.
	testRepo = "served"
)

// newLocal creates a fresh embedded store named testRepo.
func newLocal(t *testing.T) *local.Store {
	t.Helper()
	return artifactstest.NewLocalNamed(t, testRepo)
}

// serve runs a Server over st on a loopback listener with the test
// credentials (unless opts says otherwise) and returns its base URL.
func serve(t *testing.T, st artifacts.Store, opts *storeserver.Options) string {
	t.Helper()
	if opts == nil {
		opts = &storeserver.Options{AccessKeyID: testKey, SecretAccessKey: testSecret}
	}
	_, url := artifactstest.Serve(t, st, opts)
	return url
}

// open opens the served repository with the lakefs:// backend's client.
func open(t *testing.T, url, key, secret string) *lakefs.Store {
	t.Helper()
	return artifactstest.OpenLakeFS(t, url, testRepo, key, secret)
}

// served is a fresh embedded store, its server, and a client store on it.
func served(t *testing.T) (backing *local.Store, url string, client *lakefs.Store) {
	t.Helper()
	backing = newLocal(t)
	url = serve(t, backing, nil)
	return backing, url, open(t, url, testKey, testSecret)
}

// do sends a request with the test credentials and returns the answer's
// status and body.
func do(t *testing.T, method, url string, body string, header http.Header) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		r.Header[k] = vs
	}
	if r.Header.Get("Authorization") == "" {
		r.SetBasicAuth(testKey, testSecret)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read answer: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, string(b)
}
