package storeserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
)

// randomBytes returns n bytes from a fixed seed.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestChecksumsAreTheStores checks that an artifact has the same checksum
// through the server as in the store: SHA-256 for the embedded store.
func TestChecksumsAreTheStores(t *testing.T) {
	backing, url, st := served(t)
	ctx := context.Background()
	content := []byte("rollouts of iteration 3\n")
	want := artifactstest.SHA256Hex(content)

	put, err := st.PutObject(ctx, "main", "runs/r1/rollouts.jsonl", bytes.NewReader(content), nil)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := backing.PutObject(ctx, "main", "direct.jsonl", bytes.NewReader(content), nil)
	if err != nil {
		t.Fatal(err)
	}
	inStore := artifactstest.Stat(t, backing, "main", "runs/r1/rollouts.jsonl")
	stat := artifactstest.Stat(t, st, "main", "direct.jsonl")
	rc, got, err := st.GetObject(ctx, "main", "runs/r1/rollouts.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	for step, sum := range map[string]string{
		"put through the server": put.Checksum, "put directly": direct.Checksum, "stat in the store": inStore.Checksum,
		"stat through the server": stat.Checksum, "get through the server": got.Checksum,
	} {
		if sum != want {
			t.Errorf("%s: checksum %q, want the SHA-256 %s", step, sum, want)
		}
	}
	_, header, _ := do(t, "GET", url+storeserver.APIBasePath+"/repositories/"+testRepo+"/refs/main/objects?path=direct.jsonl", "", nil)
	if etag := header.Get("ETag"); etag != `"`+want+`"` {
		t.Errorf("ETag %s, want %q", etag, want)
	}
}

// TestMetadataAndContentType uploads with lakeFS's headers and reads them
// back from the store and through the API.
func TestMetadataAndContentType(t *testing.T) {
	backing, url, _ := served(t)
	obj := url + storeserver.APIBasePath + "/repositories/" + testRepo + "/branches/main/objects?path=data/p.jsonl"
	status, _, body := do(t, "POST", obj, `{"prompt":"2+2"}`, http.Header{
		"Content-Type":              {"application/x-ndjson"},
		"X-Lakefs-Meta-Rlpipe-Task": {"prompts"},
		"x-lakefs-meta-owner":       {"rl-team"},
	})
	if status != http.StatusCreated {
		t.Fatalf("upload: %d %s", status, body)
	}
	wantMeta := map[string]string{"rlpipe-task": "prompts", "owner": "rl-team"}
	info := artifactstest.Stat(t, backing, "main", "data/p.jsonl")
	if info.ContentType != "application/x-ndjson" || !maps.Equal(info.Metadata, wantMeta) || info.Size != 16 {
		t.Fatalf("in the store: %+v, want content type application/x-ndjson, 16 bytes, metadata %v", info, wantMeta)
	}
	stat := url + storeserver.APIBasePath + "/repositories/" + testRepo + "/refs/main/objects/stat?path=data/p.jsonl"
	for _, c := range []struct {
		query string
		meta  map[string]string
	}{{"", wantMeta}, {"&user_metadata=true", wantMeta}, {"&user_metadata=false", nil}} {
		_, _, body := do(t, "GET", stat+c.query, "", nil)
		var st struct {
			Path        string            `json:"path"`
			PathType    string            `json:"path_type"`
			Checksum    string            `json:"checksum"`
			Size        int64             `json:"size_bytes"`
			Mtime       int64             `json:"mtime"`
			ContentType string            `json:"content_type"`
			Metadata    map[string]string `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatal(err)
		}
		if st.Path != "data/p.jsonl" || st.PathType != "object" || st.Checksum != info.Checksum || st.Size != 16 ||
			st.Mtime != info.Mtime.Unix() || st.ContentType != "application/x-ndjson" || !maps.Equal(st.Metadata, c.meta) {
			t.Fatalf("stat%s: %s", c.query, body)
		}
	}
}

// TestRange reads parts of an object with Range requests.
func TestRange(t *testing.T) {
	backing, url, _ := served(t)
	ctx := context.Background()
	if _, err := backing.PutObject(ctx, "main", "t", strings.NewReader("0123456789"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := backing.PutObject(ctx, "main", "empty", strings.NewReader(""), nil); err != nil {
		t.Fatal(err)
	}
	obj := url + storeserver.APIBasePath + "/repositories/" + testRepo + "/refs/main/objects?path="
	cases := []struct {
		name, path, rng    string
		status             int
		body, contentRange string
	}{
		{"first bytes", "t", "bytes=0-3", 206, "0123", "bytes 0-3/10"},
		{"middle", "t", "bytes=2-5", 206, "2345", "bytes 2-5/10"},
		{"to the end", "t", "bytes=8-", 206, "89", "bytes 8-9/10"},
		{"past the end, clamped", "t", "bytes=5-100", 206, "56789", "bytes 5-9/10"},
		{"last bytes", "t", "bytes=-3", 206, "789", "bytes 7-9/10"},
		{"more last bytes than there are", "t", "bytes=-30", 206, "0123456789", "bytes 0-9/10"},
		{"starting at the end", "t", "bytes=10-", 416, "", "bytes */10"},
		{"in an empty object", "empty", "bytes=0-9", 416, "", "bytes */0"},
		{"several ranges: the whole object", "t", "bytes=0-1,4-5", 200, "0123456789", ""},
		{"malformed: the whole object", "t", "bytes=5-2", 200, "0123456789", ""},
	}
	for _, c := range cases {
		status, header, body := do(t, "GET", obj+c.path, "", http.Header{"Range": {c.rng}})
		if status == http.StatusRequestedRangeNotSatisfiable {
			body = ""
		}
		if status != c.status || body != c.body || header.Get("Content-Range") != c.contentRange {
			t.Errorf("%s (%s): got %d %q Content-Range %q, want %d %q %q", c.name, c.rng, status, body, header.Get("Content-Range"), c.status, c.body, c.contentRange)
		}
	}
	status, header, body := do(t, "HEAD", obj+"t", "", nil)
	if status != http.StatusOK || body != "" || header.Get("Content-Length") != "10" || header.Get("ETag") != `"`+artifactstest.SHA256Hex([]byte("0123456789"))+`"` {
		t.Errorf("HEAD: %d %q %v", status, body, header)
	}
}

// watchedStore signals when PutObject's reader yields its first bytes,
// and serves GetObject from a pipe the test writes.
type watchedStore struct {
	artifacts.Store
	firstRead chan struct{}
	once      sync.Once

	download *io.PipeReader
	size     int64
}

func (w *watchedStore) PutObject(ctx context.Context, branch, path string, r io.Reader, opts *artifacts.PutOptions) (artifacts.ObjectInfo, error) {
	return w.Store.PutObject(ctx, branch, path, readerFunc(func(p []byte) (int, error) {
		n, err := r.Read(p)
		if n > 0 {
			w.once.Do(func() { close(w.firstRead) })
		}
		return n, err
	}), opts)
}

func (w *watchedStore) GetObject(ctx context.Context, ref, path string) (io.ReadCloser, artifacts.ObjectInfo, error) {
	return w.download, artifacts.ObjectInfo{Path: path, Size: w.size, Checksum: "streamed"}, nil
}

type readerFunc func(p []byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// TestStreaming shows that neither direction waits for the whole object:
// the store reads an upload's first bytes while the client still holds
// the rest, and the client reads a download's first bytes while the store
// has not produced the rest.
func TestStreaming(t *testing.T) {
	backing := newLocal(t)
	pr, pw := io.Pipe()
	ws := &watchedStore{Store: backing, firstRead: make(chan struct{}), download: pr, size: 1 << 20}
	url := serve(t, ws, nil)
	repo := url + storeserver.APIBasePath + "/repositories/" + testRepo
	content := randomBytes(1, 1<<20)

	// Upload: the body is a pipe the test feeds in two halves.
	ur, uw := io.Pipe()
	req, err := http.NewRequest("POST", repo+"/branches/main/objects?path=big.bin", ur)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(testKey, testSecret)
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				err = errors.New(resp.Status)
			}
		}
		done <- err
	}()
	if _, err := uw.Write(content[:1<<19]); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ws.firstRead:
	case err := <-done:
		t.Fatalf("upload ended before its body did: %v", err)
	case <-time.After(time.Minute): // a hang guard, not a measurement
		t.Fatal("the store saw no byte of the upload while the client held the rest: the server buffers uploads")
	}
	if _, err := uw.Write(content[1<<19:]); err != nil {
		t.Fatal(err)
	}
	uw.Close()
	if err := <-done; err != nil {
		t.Fatalf("upload: %v", err)
	}
	info, err := backing.StatObject(context.Background(), "main", "big.bin")
	if err != nil || info.Size != 1<<20 || info.Checksum != artifactstest.SHA256Hex(content) {
		t.Fatalf("uploaded object: %+v, %v", info, err)
	}

	// Download: the store's reader is a pipe the test feeds in two halves.
	req, err = http.NewRequest("GET", repo+"/refs/main/objects?path=big.bin", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(testKey, testSecret)
	go func() { _, _ = pw.Write(content[:1<<19]) }()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, 1<<18)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatalf("read the first bytes while the store has not produced the rest: %v", err)
	}
	go func() {
		_, _ = pw.Write(content[1<<19:])
		pw.Close()
	}()
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got := append(first, rest...); !bytes.Equal(got, content) {
		t.Fatalf("download: %d bytes that differ from the %d written", len(got), len(content))
	}
}

// TestIntegrityFailureNeverLooksWhole corrupts blobs of the embedded
// store on disk: a small object is refused before its first byte (a 500
// naming the failure); a large one, which the embedded store reads in one
// pass checking each 1 MiB chunk, is cut off before the damaged chunk
// (the body ends short of its Content-Length, with only good bytes), so
// the client never reads a complete-looking body.
func TestIntegrityFailureNeverLooksWhole(t *testing.T) {
	backing, url, st := served(t)
	ctx := context.Background()
	// 8 KiB: a blob file (smaller objects live in the metadata file).
	small, large := randomBytes(1, 8<<10), randomBytes(2, 5<<20)
	for path, content := range map[string][]byte{"small": small, "large": large} {
		info, err := backing.PutObject(ctx, "main", path, bytes.NewReader(content), nil)
		if err != nil {
			t.Fatal(err)
		}
		blob := filepath.Join(backing.Dir(), "blobs", info.Checksum[:2], info.Checksum)
		if err := os.Chmod(blob, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(blob, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{content[len(content)/2] ^ 0xff}, int64(len(content)/2)); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}

	status, header, body := do(t, "GET", url+storeserver.APIBasePath+"/repositories/"+testRepo+"/refs/main/objects?path=small", "", nil)
	want := "integrity check failed: main:small: blob " + artifactstest.SHA256Hex(small) + " read back as 8192 bytes with digest "
	if status != http.StatusInternalServerError || !strings.HasPrefix(messageOf(t, body), want) || header.Get("ETag") != "" {
		t.Fatalf("GET a corrupted small object: %d %s", status, body)
	}
	req, err := http.NewRequest("GET", url+storeserver.APIBasePath+"/repositories/"+testRepo+"/refs/main/objects?path=large", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(testKey, testSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err == nil || len(got) >= len(large) || !bytes.Equal(got, large[:len(got)]) {
		t.Fatalf("GET a corrupted large object: %d, %d of %d bytes, error %v; want a body cut off before the damaged chunk", resp.StatusCode, len(got), len(large), err)
	}
	for _, path := range []string{"small", "large"} {
		rc, _, err := st.GetObject(ctx, "main", path)
		if err != nil {
			continue // refused before the first byte: right
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err == nil {
			t.Fatalf("read the corrupted %s object: %d bytes and no error", path, len(got))
		}
		if len(got) >= len(large) {
			t.Fatalf("read the corrupted %s object: all %d bytes came through before the error", path, len(got))
		}
	}
}

// TestMultipartUpload uploads the way lakeFS's form does: a part named
// "content".
func TestMultipartUpload(t *testing.T) {
	backing, url, _ := served(t)
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	if err := mw.WriteField("note", "ignored"); err != nil {
		t.Fatal(err)
	}
	part, err := mw.CreateFormFile("content", "p.txt")
	if err != nil {
		t.Fatal(err)
	}
	part.Write([]byte("from a form"))
	mw.Close()
	status, _, resp := do(t, "POST", url+storeserver.APIBasePath+"/repositories/"+testRepo+"/branches/main/objects?path=form.txt",
		body.String(), http.Header{"Content-Type": {mw.FormDataContentType()}})
	if status != http.StatusCreated {
		t.Fatalf("multipart upload: %d %s", status, resp)
	}
	rc, info, err := backing.GetObject(context.Background(), "main", "form.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, _ := io.ReadAll(rc)
	if string(got) != "from a form" || info.ContentType != "" {
		t.Fatalf("stored %q as %q, want %q without a content type", got, info.ContentType, "from a form")
	}
}

// failingStore serves every object as the byte "x" followed by a read
// error, as a store reports a digest mismatch at the end of an object.
type failingStore struct{ artifacts.Store }

func (failingStore) GetObject(ctx context.Context, ref, path string) (io.ReadCloser, artifacts.ObjectInfo, error) {
	var sent bool
	r := readerFunc(func(p []byte) (int, error) {
		if !sent {
			sent = true
			p[0] = 'x'
			return 1, nil
		}
		return 0, fmt.Errorf("%w: test corruption", artifacts.ErrIntegrity)
	})
	return io.NopCloser(r), artifacts.ObjectInfo{Path: path, Size: 1, Checksum: "c"}, nil
}

// TestFailureBeforeTheLastByte checks that a read failing after the
// object's bytes, before any byte went out, is answered as an error with
// none of the object's headers.
func TestFailureBeforeTheLastByte(t *testing.T) {
	url := serve(t, failingStore{newLocal(t)}, nil)
	status, header, body := do(t, "GET", url+storeserver.APIBasePath+"/repositories/"+testRepo+"/refs/main/objects?path=x", "", nil)
	want := "read main:x: integrity check failed: test corruption"
	if status != http.StatusInternalServerError || messageOf(t, body) != want || header.Get("ETag") != "" || header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET: %d %s %v, want 500 %q", status, body, header, want)
	}
}

// TestSameObjectWhicheverWay writes the same bytes directly and through
// the server, without a content type: the store sees one object version,
// so diff and merge find nothing between them.
func TestSameObjectWhicheverWay(t *testing.T) {
	backing, _, st := served(t)
	ctx := context.Background()
	meta := map[string]string{"rlpipe-task": "gen"}
	if _, err := backing.PutObject(ctx, "main", "out.bin", strings.NewReader("output"), &artifacts.PutOptions{Metadata: meta}); err != nil {
		t.Fatal(err)
	}
	if _, err := backing.Commit(ctx, "main", "direct", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutObject(ctx, "main", "out.bin", strings.NewReader("output"), &artifacts.PutOptions{Metadata: meta}); err != nil {
		t.Fatal(err)
	}
	info, err := backing.StatObject(ctx, "main", "out.bin")
	if err != nil || info.ContentType != "" {
		t.Fatalf("put through the server without a content type: stored %+v, %v; want none", info, err)
	}
	for ch, err := range backing.DiffUncommitted(ctx, "main") {
		t.Fatalf("the same bytes written again through the server: %+v, %v; want no change", ch, err)
	}
	// An explicit content type is kept.
	if _, err := st.PutObject(ctx, "main", "t.json", strings.NewReader("{}"), &artifacts.PutOptions{ContentType: "application/json"}); err != nil {
		t.Fatal(err)
	}
	if info, err := backing.StatObject(ctx, "main", "t.json"); err != nil || info.ContentType != "application/json" {
		t.Fatalf("put with a content type: stored %+v, %v", info, err)
	}
}

// TestCopyWithinBranch copies an object within one branch through the
// lakefs:// backend, as a run does when it carries an earlier evaluation
// forward, and checks that the server refuses the shallow copy lakeFS
// v1.84.0 refuses, so that a client asking for one fails here too.
func TestCopyWithinBranch(t *testing.T) {
	backing, url, st := served(t)
	ctx := context.Background()
	meta := map[string]string{"rlpipe-task": "eval"}
	put, err := st.PutObject(ctx, "main", "evals/000000/heldout/trajectories.parquet", strings.NewReader("trajectories"), &artifacts.PutOptions{Metadata: meta})
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.CopyObject(ctx, "main", "evals/000000/heldout/trajectories.parquet", "main", "evals/000001/heldout/trajectories.parquet")
	if err != nil {
		t.Fatalf("copy within main: %v", err)
	}
	if info.Path != "evals/000001/heldout/trajectories.parquet" || info.Checksum != put.Checksum || info.Size != put.Size {
		t.Fatalf("copy within main: got %+v, want the source's checksum %s and size %d", info, put.Checksum, put.Size)
	}
	// Staged on main, uncommitted; the bytes and metadata are the source's.
	rc, got, err := backing.GetObject(ctx, "main", "evals/000001/heldout/trajectories.parquet")
	if err != nil {
		t.Fatalf("read the copy in the store: %v", err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(b) != "trajectories" || got.Metadata["rlpipe-task"] != "eval" {
		t.Fatalf("the copy in the store: %q %+v, %v", b, got, err)
	}
	if _, err := st.Commit(ctx, "main", "copy forward", nil); err != nil {
		t.Fatal(err)
	}
	// Within a branch from one of its commits, as after a reset.
	if _, err := st.CopyObject(ctx, "main@", "evals/000001/heldout/trajectories.parquet", "main", "evals/000002/heldout/trajectories.parquet"); err != nil {
		t.Fatalf("copy within main from main@: %v", err)
	}

	repo := url + storeserver.APIBasePath + "/repositories/" + testRepo
	body := `{"src_path": "evals/000000/heldout/trajectories.parquet", "shallow": true}`
	status, header, answer := do(t, "POST", repo+"/branches/main/objects/copy?dest_path=shallow.parquet", body, nil)
	want := "Not Implemented: copy to main:shallow.parquet: shallow copies are refused, as lakeFS v1.84.0 refuses them; send shallow false for a full copy"
	if status != http.StatusNotImplemented || header.Get("Content-Type") != "application/json" || messageOf(t, answer) != want {
		t.Fatalf("shallow copy: got %d %s, want 501 %q", status, answer, want)
	}
	if _, err := backing.StatObject(ctx, "main", "shallow.parquet"); !errors.Is(err, artifacts.ErrObjectNotFound) {
		t.Fatalf("a refused shallow copy left an object: %v", err)
	}
	// As on lakeFS, a missing destination branch is reported first.
	status, _, answer = do(t, "POST", repo+"/branches/no-such-branch/objects/copy?dest_path=x", body, nil)
	if status != http.StatusNotFound || !strings.Contains(messageOf(t, answer), "branch not found") {
		t.Fatalf("shallow copy to a missing branch: got %d %s, want 404 branch not found", status, answer)
	}
}
