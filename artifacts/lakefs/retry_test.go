package lakefs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The package's tests that meet a persistent 5xx on a read wait for the
// retries; a millisecond keeps them fast. The kill test (kill_test.go)
// runs this binary as a child that puts one object (childPut).
func TestMain(m *testing.M) {
	if os.Getenv(EnvTestRole) == "put" {
		os.Exit(childPut())
	}
	retryWait = time.Millisecond
	os.Exit(m.Run())
}

// The kill test's child: its role, and what it puts where.
const (
	EnvTestRole = "RLPIPE_LAKEFS_TEST_ROLE"
	EnvTestRepo = "RLPIPE_LAKEFS_TEST_REPO"
	EnvTestFile = "RLPIPE_LAKEFS_TEST_FILE"
	EnvTestPath = "RLPIPE_LAKEFS_TEST_PATH"
)

// childPut puts the file $RLPIPE_LAKEFS_TEST_FILE at
// main:$RLPIPE_LAKEFS_TEST_PATH of the lakeFS the lakectl variables
// name, and prints its checksum.
func childPut() int {
	ctx := context.Background()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := NewClient(ConfigFromEnv())
	if err != nil {
		return fail(err)
	}
	st, err := Open(ctx, c, os.Getenv(EnvTestRepo), nil)
	if err != nil {
		return fail(err)
	}
	defer st.Close()
	f, err := os.Open(os.Getenv(EnvTestFile))
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	info, err := st.PutObject(ctx, "main", os.Getenv(EnvTestPath), f, nil)
	if err != nil {
		return fail(err)
	}
	fmt.Println(info.Checksum)
	return 0
}

// refusing fails its first n round trips as a refused connection does.
type refusing struct {
	n     atomic.Int32
	inner http.RoundTripper
}

func (f *refusing) RoundTrip(req *http.Request) (*http.Response, error) {
	if f.n.Add(-1) >= 0 {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	return f.inner.RoundTrip(req)
}

func TestTransientFailuresAreSentAgain(t *testing.T) {
	var hits, unavailable atomic.Int32
	var lastBody atomic.Value
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		lastBody.Store(string(b))
		if unavailable.Add(-1) >= 0 {
			http.Error(w, `{"message": "restarting"}`, http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{}`))
	}))
	defer hs.Close()
	rt := &refusing{inner: http.DefaultTransport}
	c, err := NewClient(Config{Endpoint: hs.URL, HTTPClient: &http.Client{Transport: rt}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	send := func(method string, body io.Reader, length int64) error {
		resp, err := c.do(ctx, request{method: method, path: "/x", body: body, length: length})
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	cases := []struct {
		name             string
		refused, unavail int32
		method           string
		body             func() io.Reader
		wantErr          bool
		wantHits         int32
	}{
		{"a read the server cannot serve yet", 0, 2, http.MethodGet, nil, false, 3},
		{"a read that stays unavailable gives up", 0, 100, http.MethodGet, nil, true, int32(retryTries)},
		{"a write answered 503 is not sent again", 0, 1, http.MethodPost, func() io.Reader { return strings.NewReader("x") }, true, 1},
		{"a write that never reached the server is", 2, 0, http.MethodPost, func() io.Reader { return bytes.NewReader([]byte("body")) }, false, 1},
		{"unless its body cannot be sent again", 1, 0, http.MethodPost, func() io.Reader { return io.MultiReader(strings.NewReader("body")) }, true, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hits.Store(0)
			rt.n.Store(tc.refused)
			unavailable.Store(tc.unavail)
			var body io.Reader
			var length int64
			if tc.body != nil {
				body, length = tc.body(), 4
				if tc.name == "a write answered 503 is not sent again" {
					length = 1
				}
			}
			err := send(tc.method, body, length)
			if (err != nil) != tc.wantErr || hits.Load() != tc.wantHits {
				t.Fatalf("err %v, %d requests reached the server; want error %v, %d", err, hits.Load(), tc.wantErr, tc.wantHits)
			}
			if tc.name == "a write that never reached the server is" && lastBody.Load() != "body" {
				t.Errorf("the server got body %q after the retries", lastBody.Load())
			}
			var op *net.OpError
			if tc.name == "unless its body cannot be sent again" && !errors.As(err, &op) {
				t.Errorf("err = %v, want the refused connection", err)
			}
		})
	}
}

// An upload whose connection was refused (lakeFS restarting) is sent
// again, from where its body started: a file read from an offset is
// uploaded from that offset, whole, once it reaches the server.
func TestUploadIsSentAgainFromWhereItsBodyStarted(t *testing.T) {
	s := newStub(t)
	var got atomic.Value
	s.handle("POST /repositories/{repo}/branches/{branch}/objects", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(string(b))
		writeJSON(w, http.StatusCreated, map[string]any{"path": r.URL.Query().Get("path"), "checksum": "c", "size_bytes": len(b)})
	})
	c, err := NewClient(Config{Endpoint: s.srv.URL, AccessKeyID: testKey, SecretAccessKey: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	rt := &refusing{inner: http.DefaultTransport}
	rt.n.Store(2)
	c.hc = &http.Client{Transport: rt}
	st := &Store{c: c, repo: testRepo, defaultBranch: "main"}

	f, err := os.CreateTemp(t.TempDir(), "body")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("skip:the body"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(int64(len("skip:")), io.SeekStart); err != nil {
		t.Fatal(err)
	}
	info, err := st.PutObject(context.Background(), "main", "a.txt", f, nil)
	if err != nil {
		t.Fatalf("put after two refused connections: %v", err)
	}
	if got.Load() != "the body" || info.Size != 8 {
		t.Errorf("the server got %q (%d bytes); want %q", got.Load(), info.Size, "the body")
	}
	if rt.n.Load() >= 0 {
		t.Errorf("the refusals were not all used: %d left", rt.n.Load())
	}
	// A buffer too (events and reports are uploaded from one), drained
	// as if read.
	rt.n.Store(2)
	buf := bytes.NewBufferString("from a buffer")
	if _, err := st.PutObject(context.Background(), "main", "b.txt", buf, nil); err != nil {
		t.Fatalf("put of a buffer after two refused connections: %v", err)
	}
	if got.Load() != "from a buffer" || buf.Len() != 0 {
		t.Errorf("the server got %q, %d bytes left in the buffer", got.Load(), buf.Len())
	}
}
