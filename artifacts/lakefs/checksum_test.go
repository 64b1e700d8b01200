package lakefs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
)

// md5LakeFS is an embedded store served as a lakeFS whose checksums are
// MD5s (storeserver.Faults.MD5Checksums), the client store on it, and the
// server's base URL.
func md5LakeFS(t *testing.T) (backing *local.Store, client *lakefs.Store, url string) {
	t.Helper()
	backing = artifactstest.NewLocalNamed(t, "md5")
	client, srv, base := artifactstest.ServeLakeFS(t, backing, &storeserver.Options{Faults: storeserver.Faults{MD5Checksums: true}})
	return backing, client, base + storeserver.APIBasePath + "/repositories/" + srv.Repository()
}

// TestRecordedSHA256 puts objects through a lakeFS that reports MD5
// checksums: every answer about an object put from a body that can be
// read twice (a bytes or strings reader, a file, a bytes.Buffer) reports
// the SHA-256 of its bytes, as the embedded store does, and its user
// metadata comes back as given.
func TestRecordedSHA256(t *testing.T) {
	ctx := context.Background()
	backing, st, url := md5LakeFS(t)
	content := []byte("rollouts of iteration 3\n")
	want := artifactstest.SHA256Hex(content)
	meta := map[string]string{"rlpipe-task": "gen", "owner": "rl"}

	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The file holds a prefix that is not sent: it is read from where it stands.
	if _, err := f.Write(append([]byte("not sent"), content...)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(int64(len("not sent")), io.SeekStart); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]io.Reader{
		"bytes.Reader": bytes.NewReader(content), "strings.Reader": strings.NewReader(string(content)),
		"file": f, "bytes.Buffer": bytes.NewBuffer(content),
	} {
		path := "put/" + name
		put, err := st.PutObject(ctx, "main", path, body, &artifacts.PutOptions{Metadata: meta})
		if err != nil {
			t.Fatalf("put from a %s: %v", name, err)
		}
		if put.Checksum != want || put.Size != int64(len(content)) || !maps.Equal(put.Metadata, meta) {
			t.Errorf("put from a %s: %+v, want checksum %s, %d bytes, metadata %v", name, put, want, len(content), meta)
		}
		// lakeFS keeps the SHA-256 as user metadata; its checksum is the MD5.
		in := artifactstest.Stat(t, backing, "main", path)
		if in.Metadata[lakefs.MetaSHA256] != want || len(in.Metadata) != 3 {
			t.Errorf("put from a %s: stored metadata %v, want %v and %s=%s", name, in.Metadata, meta, lakefs.MetaSHA256, want)
		}
	}

	stat := artifactstest.Stat(t, st, "main", "put/file")
	rc, got, err := st.GetObject(ctx, "main", "put/file")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(b, content) {
		t.Fatalf("get: %q, %v", b, err)
	}
	cp, err := st.CopyObject(ctx, "main", "put/file", "main", "copied")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]artifacts.ObjectInfo{}
	for e, err := range st.ListObjects(ctx, "main", nil) {
		if err != nil {
			t.Fatal(err)
		}
		listed[e.Path] = e.ObjectInfo
	}
	for step, info := range map[string]artifacts.ObjectInfo{
		"stat": stat, "get": got, "copy": cp, "list": listed["put/file"], "list the copy": listed["copied"],
	} {
		if info.Checksum != want || !maps.Equal(info.Metadata, meta) {
			t.Errorf("%s: checksum %s, metadata %v; want %s, %v", step, info.Checksum, info.Metadata, want, meta)
		}
	}
	// On the wire, lakeFS's own checksum: the MD5, in stats and as the ETag.
	resp, err := http.Get(url + "/refs/main/objects?path=put/file")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if etag := resp.Header.Get("ETag"); etag != `"`+artifactstest.MD5Hex(content)+`"` {
		t.Errorf("ETag %s, want the MD5 %q", etag, artifactstest.MD5Hex(content))
	}
}

// TestLakeFSChecksumWithoutARecordedSHA256 covers the objects whose
// checksum stays lakeFS's: one put from a body that can be read only once,
// one written by another client, and one whose recorded value is not a
// SHA-256 as rlpipe writes it.
func TestLakeFSChecksumWithoutARecordedSHA256(t *testing.T) {
	ctx := context.Background()
	backing, st, _ := md5LakeFS(t)
	content := []byte("a body read once\n")
	wantMD5 := artifactstest.MD5Hex(content)

	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeAll(pw, content)) }()
	put, err := st.PutObject(ctx, "main", "piped", pr, &artifacts.PutOptions{Metadata: map[string]string{"owner": "rl"}})
	if err != nil {
		t.Fatal(err)
	}
	if put.Checksum != wantMD5 || !maps.Equal(put.Metadata, map[string]string{"owner": "rl"}) {
		t.Errorf("put from a pipe: %+v, want the MD5 %s", put, wantMD5)
	}
	if in, err := backing.StatObject(ctx, "main", "piped"); err != nil || len(in.Metadata) != 1 {
		t.Errorf("put from a pipe: stored %+v, %v; want no %s", in, err, lakefs.MetaSHA256)
	}

	if _, err := backing.PutObject(ctx, "main", "other", bytes.NewReader(content), nil); err != nil {
		t.Fatal(err)
	}
	// Upper-case hex: not what rlpipe writes, so not taken for a SHA-256.
	bad := map[string]string{lakefs.MetaSHA256: strings.ToUpper(artifactstest.SHA256Hex(content)), "owner": "rl"}
	if _, err := backing.PutObject(ctx, "main", "malformed", bytes.NewReader(content), &artifacts.PutOptions{Metadata: bad}); err != nil {
		t.Fatal(err)
	}
	for path, meta := range map[string]map[string]string{"piped": {"owner": "rl"}, "other": nil, "malformed": {"owner": "rl"}} {
		info := artifactstest.Stat(t, st, "main", path)
		if info.Checksum != wantMD5 || !maps.Equal(info.Metadata, meta) {
			t.Errorf("stat %s: checksum %s, metadata %v; want the MD5 %s, %v", path, info.Checksum, info.Metadata, wantMD5, meta)
		}
		rc, got, err := st.GetObject(ctx, "main", path)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(b, content) || got.Checksum != wantMD5 {
			t.Errorf("get %s: %q, checksum %s, %v", path, b, got.Checksum, err)
		}
	}
}

func writeAll(w io.Writer, b []byte) error {
	_, err := w.Write(b)
	return err
}

// TestReservedSHA256Key checks that user metadata cannot name the key.
func TestReservedSHA256Key(t *testing.T) {
	ctx := context.Background()
	_, st, _ := md5LakeFS(t)
	for _, key := range []string{"rlpipe-sha256", "Rlpipe-SHA256"} {
		_, err := st.PutObject(ctx, "main", "x", strings.NewReader("x"), &artifacts.PutOptions{Metadata: map[string]string{key: artifactstest.SHA256Hex([]byte("x"))}})
		want := `lakefs: put main:x: invalid argument: metadata key "` + key + `" is reserved: the store records the object's SHA-256 under it; name your key otherwise`
		if !errors.Is(err, artifacts.ErrInvalid) || err.Error() != want {
			t.Errorf("put with metadata %s: %v, want %q", key, err, want)
		}
	}
	if _, err := st.StatObject(ctx, "main", "x"); !errors.Is(err, artifacts.ErrObjectNotFound) {
		t.Errorf("a refused put left an object: %v", err)
	}
}

// changingBody is a seekable body whose bytes change once it has been
// read to its end, as a file rewritten during an upload does.
type changingBody struct {
	*bytes.Reader
	then []byte
}

func (c *changingBody) Seek(off int64, whence int) (int64, error) {
	if c.then != nil && c.Reader.Len() == 0 {
		c.Reader, c.then = bytes.NewReader(c.then), nil
	}
	return c.Reader.Seek(off, whence)
}

// TestBodyChangedDuringUpload checks that a body whose bytes differ from
// the ones hashed before the upload fails the put, and that the object it
// left, whose bytes do not match the SHA-256 recorded with them, fails
// its reads rather than passing for the bytes hashed.
func TestBodyChangedDuringUpload(t *testing.T) {
	ctx := context.Background()
	_, st, _ := md5LakeFS(t)
	before, sent := []byte("version 1"), []byte("version 2")
	_, err := st.PutObject(ctx, "main", "iterations/000001/x.parquet", &changingBody{Reader: bytes.NewReader(before), then: sent}, nil)
	crc := func(b []byte) string {
		return fmt.Sprintf("%08x", crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	}
	want := "lakefs: put main:iterations/000001/x.parquet: integrity check failed: the body changed while it was sent (CRC-32C " + crc(before) +
		" before the upload, " + crc(sent) + " as sent), so main:iterations/000001/x.parquet holds bytes that do not match the SHA-256 recorded with them: put it again from a body that does not change"
	if !errors.Is(err, artifacts.ErrIntegrity) || err.Error() != want {
		t.Fatalf("put of a changing body: %v, want %q", err, want)
	}
	rc, info, err := st.GetObject(ctx, "main", "iterations/000001/x.parquet")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	wantRead := "integrity check failed: read main:iterations/000001/x.parquet: its bytes have SHA-256 " + artifactstest.SHA256Hex(sent) + ", not the " + artifactstest.SHA256Hex(before) +
		" recorded under rlpipe-sha256 when it was written (changed by a tool that kept rlpipe's metadata, or the body changed while it was uploaded): " +
		"write it again from a sound copy (`rlpipe put FILE BRANCH:iterations/000001/x.parquet`, then commit) or revert the commit that wrote it; " +
		"`rlpipe fsck` lists every damaged object the refs of this lakeFS repository reach"
	if info.Checksum != artifactstest.SHA256Hex(before) || !errors.Is(err, artifacts.ErrIntegrity) || err.Error() != wantRead || string(b) != string(sent) {
		t.Fatalf("read back: %q, checksum %s, %v; want %q", b, info.Checksum, err, wantRead)
	}
	// Written again, it reads clean.
	if _, err := st.PutObject(ctx, "main", "iterations/000001/x.parquet", bytes.NewReader(sent), nil); err != nil {
		t.Fatal(err)
	}
	rc, info, err = st.GetObject(ctx, "main", "iterations/000001/x.parquet")
	if err != nil {
		t.Fatal(err)
	}
	b, err = io.ReadAll(rc)
	rc.Close()
	if err != nil || string(b) != string(sent) || info.Checksum != artifactstest.SHA256Hex(sent) {
		t.Fatalf("rewritten: %q, checksum %s, %v", b, info.Checksum, err)
	}
}
