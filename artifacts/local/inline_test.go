package local

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/rlpipe/rlpipe/artifacts"
)

// blobFiles counts the files under the store's blobs directory.
func blobFiles(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(s.Dir(), blobsDir), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// inlineCount counts the inline records in meta.db.
func inlineCount(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	err := s.view(context.Background(), func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketInline); b != nil {
			n = b.Stats().KeyN
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func readAll(t *testing.T, s *Store, ref, path string) string {
	t.Helper()
	rc, _, err := s.GetObject(context.Background(), ref, path)
	if err != nil {
		t.Fatalf("read %s:%s: %v", ref, path, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s:%s: %v", ref, path, err)
	}
	return string(b)
}

// newTestStore creates a store in a new directory, closed when the test
// ends (storeIn, for a test that needs no path).
func newTestStore(t *testing.T) *Store {
	t.Helper()
	s, _ := storeIn(t)
	return s
}

// TestSmallObjectsLiveInTheMetadataFile: objects up to inlineMax bytes
// get no blob file; identical ones are stored once; every way of reading
// them returns their bytes; one byte more makes a file.
func TestSmallObjectsLiveInTheMetadataFile(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	edge := strings.Repeat("x", inlineMax)
	for path, body := range map[string]string{"a": "same", "b": "same", "empty": "", "edge": edge} {
		if _, err := s.PutObject(ctx, "main", path, strings.NewReader(body), nil); err != nil {
			t.Fatal(err)
		}
	}
	if n, m := blobFiles(t, s), inlineCount(t, s); n != 0 || m != 3 {
		t.Fatalf("after 4 small objects (3 distinct): %d blob files, %d inline records; want 0 and 3", n, m)
	}
	if got := readAll(t, s, "main", "edge"); got != edge {
		t.Fatalf("edge object read back as %d bytes, want %d", len(got), len(edge))
	}
	if got := readAll(t, s, "main", "empty"); got != "" {
		t.Fatalf("empty object read back as %q", got)
	}
	rc, err := s.GetObjectRange(ctx, "main", "a", 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := io.ReadAll(rc)
	rc.Close()
	if string(part) != "am" {
		t.Fatalf("range 1+2 of %q = %q, want %q", "same", part, "am")
	}
	if _, err := s.CopyObject(ctx, "main", "a", "main", "copy"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, "main", "small things", nil); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, "main", "copy"); got != "same" {
		t.Fatalf("copy read back as %q", got)
	}
	if _, err := s.PutObject(ctx, "main", "big", strings.NewReader(edge+"y"), nil); err != nil {
		t.Fatal(err)
	}
	if n := blobFiles(t, s); n != 1 {
		t.Fatalf("an object of inlineMax+1 bytes made %d blob files, want 1", n)
	}
	if got := readAll(t, s, "main", "big"); got != edge+"y" {
		t.Fatalf("big object read back as %d bytes", len(got))
	}
}

// TestSmallObjectInAFileStillReads: a store written before inline objects
// existed has small objects in blob files; they read as before.
func TestSmallObjectInAFileStillReads(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	w, err := s.blobs.put(ctx, strings.NewReader("written by an older rlpipe"))
	if err != nil {
		t.Fatal(err)
	}
	e := &entry{Path: "old.txt", Digest: w.digest, Size: w.size, Mtime: time.Now().UnixNano()}
	err = s.update(ctx, func(tx *bolt.Tx) error {
		st, err := tx.Bucket(bucketStaging).CreateBucketIfNotExists([]byte("main"))
		if err != nil {
			return err
		}
		return putJSON(st, []byte(e.Path), staged{Entry: e})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, "main", "old.txt"); got != "written by an older rlpipe" {
		t.Fatalf("read %q", got)
	}
	res, err := s.Verify(ctx, nil)
	if err != nil || len(res.Damage) != 0 || res.Objects != 1 {
		t.Fatalf("verify: %+v, %v; want one sound object", res, err)
	}
}

// TestCorruptInlineBytesAreReportedNotReturned: a read of inline bytes
// that no longer match their digest fails with ErrIntegrity naming the
// object.
func TestCorruptInlineBytesAreReportedNotReturned(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	info, err := s.PutObject(ctx, "main", "x.json", strings.NewReader(`{"key":"value"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketInline)
		v := bytes.Clone(b.Get([]byte(info.Checksum)))
		v[3] ^= 0x40
		return b.Put([]byte(info.Checksum), v)
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, read := range map[string]func() error{
		"whole": func() error { _, _, err := s.GetObject(ctx, "main", "x.json"); return err },
		"range": func() error { _, err := s.GetObjectRange(ctx, "main", "x.json", 0, 4); return err },
	} {
		if err := read(); !errors.Is(err, artifacts.ErrIntegrity) || !strings.Contains(err.Error(), "main:x.json") {
			t.Errorf("%s read of corrupted inline bytes: %v, want ErrIntegrity naming main:x.json", name, err)
		}
	}
}

// TestGCRemovesInlineBytesNothingNames: a small object's bytes go at the
// first collection after nothing names them, grace period or not; bytes
// still named (by history or by a staged change) stay.
func TestGCRemovesInlineBytesNothingNames(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	for path, body := range map[string]string{"keep": "kept", "drop": "dropped"} {
		if _, err := s.PutObject(ctx, "main", path, strings.NewReader(body), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Commit(ctx, "main", "two", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteObject(ctx, "main", "drop"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutObject(ctx, "main", "staged", strings.NewReader("staged"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, "main", "drop one", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutObject(ctx, "main", "uncommitted", strings.NewReader("uncommitted"), nil); err != nil {
		t.Fatal(err)
	}
	// The first commit still reaches "drop": nothing is collected yet.
	res, err := s.GC(ctx, &artifacts.GCOptions{GracePeriod: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.BlobsRemoved != 0 || inlineCount(t, s) != 4 {
		t.Fatalf("gc removed %d blobs while history still names all (%d inline left)", res.BlobsRemoved, inlineCount(t, s))
	}
	if err := s.DeleteObject(ctx, "main", "uncommitted"); err != nil {
		t.Fatal(err)
	}
	res, err = s.GC(ctx, &artifacts.GCOptions{GracePeriod: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.BlobsRemoved != 1 || res.BytesRemoved != int64(len("uncommitted")) || inlineCount(t, s) != 3 {
		t.Fatalf("gc after unstaging one small object: removed %d (%d bytes), %d inline left; want 1 (%d bytes), 3 left",
			res.BlobsRemoved, res.BytesRemoved, inlineCount(t, s), len("uncommitted"))
	}
	for p, want := range map[string]string{"keep": "kept", "staged": "staged"} {
		if got := readAll(t, s, "main", p); got != want {
			t.Fatalf("%s after gc: %q, want %q", p, got, want)
		}
	}
}

// TestCloseReleasesTheMetadataFileAtOnce: the metadata file stays open a
// moment after an operation for the next one to reuse, but Close releases
// it at once, so another opener (here with a lock timeout too short to
// wait for anyone) gets it on its first try.
func TestCloseReleasesTheMetadataFileAtOnce(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	if _, err := s.PutObject(ctx, "main", "x", strings.NewReader("x"), nil); err != nil {
		t.Fatal(err)
	}
	readAll(t, s, "main", "x")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	other, err := Open(ctx, s.Dir(), &Options{LockTimeout: time.Millisecond})
	if err != nil {
		t.Fatalf("open after Close: %v", err)
	}
	defer other.Close()
	if got := readAll(t, other, "main", "x"); got != "x" {
		t.Fatalf("read through the second store: %q", got)
	}
}
