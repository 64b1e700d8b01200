package lakefs_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
	"github.com/rlpipe/rlpipe/internal/bounded"
)

// presignRig is an embedded store served as a lakeFS (with a block store
// of its own when asked), the client store on it with a small presign
// threshold, the API requests the server saw and the client's log.
type presignRig struct {
	backing *local.Store
	bs      *storeserver.BlockStore
	st      *lakefs.Store
	url     string // the API server's base URL
	repo    string

	mu   sync.Mutex
	reqs []string
	log  bounded.Tail
}

// testThreshold is the rigs' presign threshold: 1 KiB.
const testThreshold = 1 << 10

// newPresignRig serves a fresh embedded store; bs nil serves it as a
// lakeFS without presigned transfers.
func newPresignRig(t *testing.T, bs *storeserver.BlockStore, threshold int64) *presignRig {
	t.Helper()
	rig := &presignRig{backing: artifactstest.NewLocalNamed(t, "presign"), bs: bs, log: bounded.Tail{Max: 1 << 20}}
	srv, err := storeserver.New(context.Background(), rig.backing, &storeserver.Options{BlockStore: bs})
	if err != nil {
		t.Fatal(err)
	}
	rig.repo = srv.Repository()
	prefix := storeserver.APIBasePath + "/repositories/" + rig.repo
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := strings.TrimPrefix(r.URL.Path, storeserver.APIBasePath)
		if rest, ok := strings.CutPrefix(r.URL.Path, prefix); ok {
			p = rest
		}
		rig.mu.Lock()
		rig.reqs = append(rig.reqs, r.Method+" "+p)
		rig.mu.Unlock()
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	rig.url = hs.URL
	logger := zerolog.New(&rig.log)
	rig.st = artifactstest.OpenLakeFSWith(t, lakefs.Config{Endpoint: hs.URL, PresignThreshold: threshold}, rig.repo, &artifacts.Options{Logger: logger})
	rig.requests() // forget the open
	return rig
}

// requests returns the API requests seen since the last call, as
// "METHOD path" with paths under the repository relative to it.
func (r *presignRig) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reqs
	r.reqs = nil
	return out
}

// warnings returns the error and message fields of each warn line of a
// JSON log.
func warnings(t *testing.T, log *bounded.Tail) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(log.Text()), "\n") {
		if line == "" {
			continue
		}
		var ev struct {
			Level, Error, Message string
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if ev.Level == "warn" {
			out = append(out, ev.Error+" | "+ev.Message)
		}
	}
	return out
}

// content is n bytes that differ from one offset to the next.
func content(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

const (
	stagingBacking = "/branches/main/staging/backing"
	statPath       = "/refs/main/objects/stat"
	uploadPath     = "/branches/main/objects"
	getPath        = "/refs/main/objects"
)

// TestPresignedTransfers puts and reads back one object per case and
// checks the API requests the client sent, how many transfers went to
// the block store, and that the bytes and checksum are the embedded
// store's.
func TestPresignedTransfers(t *testing.T) {
	pipe := func(b []byte) io.Reader { return io.MultiReader(bytes.NewReader(b)) } // read once: no Seek, no Len
	cases := []struct {
		name                   string
		blockStore             bool
		threshold              int64
		size                   int
		body                   func([]byte) io.Reader
		wantPut                []string
		wantGet                []string
		wantUploads, wantReads int64 // through the block store
	}{
		{name: "above the threshold: presigned both ways", blockStore: true, threshold: testThreshold, size: 64 << 10,
			wantPut:     []string{"GET /config", "GET " + stagingBacking, "PUT " + stagingBacking},
			wantGet:     []string{"GET " + statPath, "GET " + statPath},
			wantUploads: 1, wantReads: 1},
		{name: "at the threshold: through the API", blockStore: true, threshold: testThreshold, size: testThreshold,
			wantPut: []string{"POST " + uploadPath},
			wantGet: []string{"GET " + statPath, "GET " + getPath}},
		{name: "a body read once: through the API", blockStore: true, threshold: testThreshold, size: 64 << 10, body: pipe,
			wantPut:   []string{"POST " + uploadPath},
			wantGet:   []string{"GET " + statPath, "GET /config", "GET " + statPath},
			wantReads: 1},
		{name: "presign off: through the API", blockStore: true, threshold: -1, size: 64 << 10,
			wantPut: []string{"POST " + uploadPath},
			wantGet: []string{"GET " + statPath, "GET " + getPath}},
		{name: "server without presign: asked once, then the API", blockStore: false, threshold: testThreshold, size: 64 << 10,
			wantPut: []string{"GET /config", "POST " + uploadPath},
			wantGet: []string{"GET " + statPath, "GET " + getPath}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var bs *storeserver.BlockStore
			if c.blockStore {
				bs = artifactstest.ServeBlockStore(t, storeserver.BlockStoreOptions{})
			}
			rig := newPresignRig(t, bs, c.threshold)
			data := content(c.size)
			body := io.Reader(bytes.NewReader(data))
			if c.body != nil {
				body = c.body(data)
			}
			ctx := context.Background()
			info, err := rig.st.PutObject(ctx, "main", "w/model.safetensors", body, &artifacts.PutOptions{Metadata: map[string]string{"shard": "1"}})
			if err != nil {
				t.Fatalf("put: %v", err)
			}
			if got := rig.requests(); !slices.Equal(got, c.wantPut) {
				t.Errorf("put sent %q, want %q", got, c.wantPut)
			}
			direct := artifactstest.Stat(t, rig.backing, "main", "w/model.safetensors")
			if direct.Checksum != artifactstest.SHA256Hex(data) || direct.Size != int64(c.size) || direct.Metadata["shard"] != "1" {
				t.Errorf("stored %+v, want SHA-256 %s, %d bytes, shard=1", direct, artifactstest.SHA256Hex(data), c.size)
			}
			if c.body == nil && (info.Checksum != direct.Checksum || info.Size != direct.Size) {
				t.Errorf("put answered %+v, want the store's %+v", info, direct)
			}
			got, ginfo := artifactstest.ReadInfo(t, rig.st, "main", "w/model.safetensors")
			if !bytes.Equal(got, data) || ginfo.Checksum != direct.Checksum || ginfo.Metadata["shard"] != "1" {
				t.Errorf("read back %d bytes (equal: %v), %+v", len(got), bytes.Equal(got, data), ginfo)
			}
			if got := rig.requests(); !slices.Equal(got, c.wantGet) {
				t.Errorf("get sent %q, want %q", got, c.wantGet)
			}
			if bs != nil && (bs.Uploads() != c.wantUploads || bs.Reads() != c.wantReads || bs.Pending() != 0) {
				t.Errorf("block store: %d uploads, %d reads, %d pending; want %d, %d, 0", bs.Uploads(), bs.Reads(), bs.Pending(), c.wantUploads, c.wantReads)
			}
			if w := warnings(t, &rig.log); len(w) != 0 {
				t.Errorf("warnings: %q", w)
			}
		})
	}
}

// TestPresignedPutIfAbsent refuses a path that holds an object before any
// byte goes to the block store, and puts to a free one.
func TestPresignedPutIfAbsent(t *testing.T) {
	bs := artifactstest.ServeBlockStore(t, storeserver.BlockStoreOptions{})
	rig := newPresignRig(t, bs, testThreshold)
	ctx := context.Background()
	data := content(8 << 10)
	opts := &artifacts.PutOptions{IfAbsent: true}
	if _, err := rig.st.PutObject(ctx, "main", "a", bytes.NewReader(data), opts); err != nil {
		t.Fatalf("put to a free path: %v", err)
	}
	_, err := rig.st.PutObject(ctx, "main", "a", bytes.NewReader(data), opts)
	want := "lakefs: put main:a: object exists: main:a holds an object already"
	if !errors.Is(err, artifacts.ErrObjectExists) || err.Error() != want {
		t.Fatalf("put to a taken path: %v, want %s", err, want)
	}
	if bs.Uploads() != 1 || bs.Pending() != 0 {
		t.Errorf("block store: %d uploads, %d pending; want 1, 0", bs.Uploads(), bs.Pending())
	}
}

// TestPresignedURLRefused: a block store that refuses the URLs the server
// signs (expired, a signature it does not accept) or that cannot be
// reached. The object goes through the API instead, both ways; the
// warning names the object and the block store's host, never the URL's
// path or query (the signature), nor the credentials.
func TestPresignedURLRefused(t *testing.T) {
	cases := []struct {
		name    string
		faults  storeserver.BlockFaults
		down    bool
		putWhy  string // after "upload to the block store at HOST: "
		readWhy string
	}{
		{name: "expired", faults: storeserver.BlockFaults{ExpiredURLs: true},
			putWhy:  "it answered 403 Forbidden (AccessDenied: Request has expired)",
			readWhy: "it answered 403 Forbidden (AccessDenied: Request has expired)"},
		{name: "signature refused", faults: storeserver.BlockFaults{WrongSignatures: true},
			putWhy:  "it answered 403 Forbidden (SignatureDoesNotMatch: The request signature we calculated does not match the signature you provided.)",
			readWhy: "it answered 403 Forbidden (SignatureDoesNotMatch: The request signature we calculated does not match the signature you provided.)"},
		{name: "unreachable", down: true,
			putWhy:  "dial tcp HOSTPORT: connect: connection refused",
			readWhy: "dial tcp HOSTPORT: connect: connection refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bs := artifactstest.ServeBlockStore(t, storeserver.BlockStoreOptions{Faults: c.faults})
			host := "http://127.0.0.1:1"
			if c.down {
				// A block store whose URL refuses connections.
				bs.SetURL(host)
			} else {
				host = blockHost(t, bs)
			}
			rig := newPresignRig(t, bs, testThreshold)
			putReadBack(t, rig, content(16<<10))
			hostport := strings.TrimPrefix(host, "http://")
			want := []string{
				"lakefs: put main:big.bin: presigned transfer failed: upload to the block store at " + host + ": " + strings.ReplaceAll(c.putWhy, "HOSTPORT", hostport) +
					" | lakefs: sending the object through the lakeFS API instead",
				"lakefs: get main:big.bin: presigned transfer failed: read from the block store at " + host + ": " + strings.ReplaceAll(c.readWhy, "HOSTPORT", hostport) +
					" | lakefs: reading the object through the lakeFS API instead",
			}
			if w := warnings(t, &rig.log); !slices.Equal(w, want) {
				t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(w, "\n"), strings.Join(want, "\n"))
			}
			for _, secret := range []string{"X-Rlpipe-Signature", "X-Rlpipe-Expires", "/blocks/"} {
				if strings.Contains(rig.log.Text(), secret) {
					t.Errorf("the log shows %q: %s", secret, rig.log.Text())
				}
			}
			if reqs := rig.requests(); !slices.Contains(reqs, "POST "+uploadPath) || !slices.Contains(reqs, "GET "+getPath) {
				t.Errorf("the API did not carry the object: %q", reqs)
			}
		})
	}
}

// A block store that stores other bytes than were sent (damaged on the
// way) is caught by its ETag before the link: nothing damaged is staged,
// the object goes through the API, and the warning names both MD5s.
func TestPresignedUploadDamaged(t *testing.T) {
	bs := artifactstest.ServeBlockStore(t, storeserver.BlockStoreOptions{Faults: storeserver.BlockFaults{DamageUploads: true}})
	rig := newPresignRig(t, bs, testThreshold)
	data := content(16 << 10)
	putReadBack(t, rig, data)
	sent := md5.Sum(data)
	damaged := bytes.Clone(data)
	damaged[0] ^= 0xff
	stored := md5.Sum(damaged)
	want := fmt.Sprintf("lakefs: put main:big.bin: presigned transfer failed: upload to the block store at %s: it holds other bytes than were sent (MD5 %x sent, its ETag %x); nothing was linked | lakefs: sending the object through the lakeFS API instead",
		blockHost(t, bs), sent, stored)
	if w := warnings(t, &rig.log); len(w) == 0 || w[0] != want {
		t.Errorf("warnings:\n%s\nwant first:\n%s", strings.Join(w, "\n"), want)
	}
	if reqs := rig.requests(); !slices.Contains(reqs, "POST "+uploadPath) {
		t.Errorf("the API did not carry the object: %q", reqs)
	}
}

// putReadBack puts data at main:big.bin through rig's client and reads it
// back, failing the test unless the same bytes come back.
func putReadBack(t *testing.T, rig *presignRig, data []byte) {
	t.Helper()
	if _, err := rig.st.PutObject(context.Background(), "main", "big.bin", bytes.NewReader(data), nil); err != nil {
		t.Fatalf("put: %v", err)
	}
	got, _ := artifactstest.ReadInfo(t, rig.st, "main", "big.bin")
	if !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, not the %d put", len(got), len(data))
	}
}

// blockHost is the scheme and host of the URLs bs signs.
func blockHost(t *testing.T, bs *storeserver.BlockStore) string {
	t.Helper()
	u := bs.URL()
	if u == "" {
		t.Fatal("block store without a URL")
	}
	return u
}

// TestPresignedCredentialsNeverShown: with credentials, a refused
// presigned upload's warning holds neither the key, the secret, nor the
// Basic header made of them.
func TestPresignedCredentialsNeverShown(t *testing.T) {
	const key, secret = "AKIAPRESIGNTESTKEY01", "c2VjcmV0LXByZXNpZ24tdGVzdC1zZWNyZXQ"
	bs := artifactstest.ServeBlockStore(t, storeserver.BlockStoreOptions{Faults: storeserver.BlockFaults{WrongSignatures: true}})
	backing := artifactstest.NewLocalNamed(t, "creds")
	srv, url := artifactstest.Serve(t, backing, &storeserver.Options{AccessKeyID: key, SecretAccessKey: secret, BlockStore: bs})
	log := bounded.Tail{Max: 1 << 20}
	st := artifactstest.OpenLakeFSWith(t, lakefs.Config{Endpoint: url, AccessKeyID: key, SecretAccessKey: secret, PresignThreshold: testThreshold},
		srv.Repository(), &artifacts.Options{Logger: zerolog.New(&log)})
	if _, err := st.PutObject(context.Background(), "main", "big.bin", bytes.NewReader(content(4<<10)), nil); err != nil {
		t.Fatalf("put: %v", err)
	}
	if len(warnings(t, &log)) != 1 {
		t.Fatalf("want one warning, got log %s", log.Text())
	}
	for _, s := range []string{key, secret, "X-Rlpipe-Signature", "Basic "} {
		if strings.Contains(log.Text(), s) {
			t.Errorf("the log shows %q", s)
		}
	}
}

// flipWriter flips the first byte of the body it writes.
type flipWriter struct {
	http.ResponseWriter
	done bool
}

func (f *flipWriter) Write(p []byte) (int, error) {
	if !f.done && len(p) > 0 {
		f.done = true
		q := append([]byte{}, p...)
		q[0] ^= 0xff
		return f.ResponseWriter.Write(q)
	}
	return f.ResponseWriter.Write(p)
}

// TestPresignedReadChecked: bytes a block store changes on the way are
// caught: the read's end is artifacts.ErrIntegrity naming the object and
// both digests, from a server whose checksums are SHA-256s and from one
// whose checksums are MD5s (the SHA-256 recorded as metadata).
func TestPresignedReadChecked(t *testing.T) {
	for _, md5 := range []bool{false, true} {
		t.Run(fmt.Sprintf("md5 checksums %v", md5), func(t *testing.T) {
			bs, err := storeserver.NewBlockStore(storeserver.BlockStoreOptions{Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			corrupt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet {
					w = &flipWriter{ResponseWriter: w}
				}
				bs.ServeHTTP(w, r)
			}))
			t.Cleanup(corrupt.Close)
			bs.SetURL(corrupt.URL)
			backing := artifactstest.NewLocalNamed(t, "flip")
			srv, url := artifactstest.Serve(t, backing, &storeserver.Options{BlockStore: bs, Faults: storeserver.Faults{MD5Checksums: md5}})
			st := artifactstest.OpenLakeFSWith(t, lakefs.Config{Endpoint: url, PresignThreshold: testThreshold}, srv.Repository(), nil)
			ctx := context.Background()
			data := content(8 << 10)
			if _, err := st.PutObject(ctx, "main", "w/a", bytes.NewReader(data), nil); err != nil {
				t.Fatalf("put: %v", err)
			}
			rc, _, err := st.GetObject(ctx, "main", "w/a")
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			defer rc.Close()
			_, err = io.ReadAll(rc)
			flipped := append([]byte{}, data...)
			flipped[0] ^= 0xff
			want := "integrity check failed: read main:w/a: its bytes have SHA-256 " + artifactstest.SHA256Hex(flipped) + ", not the " + artifactstest.SHA256Hex(data) + " recorded under rlpipe-sha256 when it was written"
			if !errors.Is(err, artifacts.ErrIntegrity) || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("read: %v\nwant an error starting %s", err, want)
			}
			if bs.Reads() != 1 {
				t.Errorf("block store reads: %d, want 1", bs.Reads())
			}
		})
	}
}
