package local

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/rlpipe/rlpipe/artifacts"
)

// onlyWriter hides a destination's ReadFrom, so io.Copy uses the
// source's WriteTo.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(p []byte) (int, error) { return o.w.Write(p) }

// TestLargeBlobStopsBeforeAChunkThatChanged changes a byte of a large
// blob on disk after GetObject opened it: the reader hands out exactly
// the chunks before the changed one, then ErrIntegrity naming the object
// and the chunk, whether it is read with Read or copied with WriteTo, and
// whether the blob has its chunk CRCs (one pass, the CRC catches it) or
// was written before they existed (two passes, the change falls between
// them and the second pass's fingerprint catches it).
func TestLargeBlobStopsBeforeAChunkThatChanged(t *testing.T) {
	const size = 5*chunkSize + 123
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(i * 7)
	}
	changed := int64(3*chunkSize + 10)
	reads := []struct {
		name string
		read func(r io.Reader) ([]byte, error)
	}{
		{"Read", io.ReadAll},
		{"WriteTo", func(r io.Reader) ([]byte, error) {
			var buf bytes.Buffer
			_, err := io.Copy(onlyWriter{&buf}, r)
			return buf.Bytes(), err
		}},
	}
	for _, blob := range []struct {
		name string
		sums bool
		want string
	}{
		{"with chunk CRCs", true, "does not match its checksum at chunk 3 (bytes 3145728 to 4194304)"},
		{"written before chunk CRCs", false, "changed on disk while it was read (chunk 3, at byte 3145728)"},
	} {
		for _, tc := range reads {
			t.Run(blob.name+"/"+tc.name, func(t *testing.T) {
				s := newTestStore(t)
				info, err := s.PutObject(context.Background(), "main", "big.bin", bytes.NewReader(body), nil)
				if err != nil {
					t.Fatal(err)
				}
				if !blob.sums {
					dropChunkSums(t, s, info.Checksum)
				}
				rc, _, err := s.GetObject(context.Background(), "main", "big.bin")
				if err != nil {
					t.Fatal(err)
				}
				defer rc.Close()
				f, err := os.OpenFile(s.blobs.path(info.Checksum), os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt([]byte{body[changed] ^ 0x01}, changed); err != nil {
					t.Fatal(err)
				}
				f.Close()
				got, err := tc.read(rc)
				want := "integrity check failed: main:big.bin: blob " + info.Checksum + " " + blob.want + " (corrupted on disk: run `rlpipe fsck` to list the damage; restore the blob from a copy, or delete the object and write it again)"
				if !errors.Is(err, artifacts.ErrIntegrity) || err.Error() != want {
					t.Fatalf("read a blob changed after it was opened:\n got %v\nwant %s", err, want)
				}
				if len(got) != 3*chunkSize || !bytes.Equal(got, body[:3*chunkSize]) {
					t.Fatalf("read %d bytes before the error, want the first %d bytes unchanged", len(got), 3*chunkSize)
				}
			})
		}
	}
}

// dropChunkSums deletes the chunk CRCs of a blob, as a store written
// before they existed has none.
func dropChunkSums(t *testing.T, s *Store, digest string) {
	t.Helper()
	err := s.update(context.Background(), func(tx *bolt.Tx) error {
		return tx.Bucket(bucketChunkSums).Delete([]byte(digest))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLargeBlobReadsWhole reads a large blob that is sound, in odd-sized
// pieces, across chunk boundaries.
func TestLargeBlobReadsWhole(t *testing.T) {
	body := bytes.Repeat([]byte("abcdefg"), verifyUpFront/7+chunkSize)[:verifyUpFront+chunkSize/3]
	s := newTestStore(t)
	if _, err := s.PutObject(context.Background(), "main", "big.bin", bytes.NewReader(body), nil); err != nil {
		t.Fatal(err)
	}
	rc, _, err := s.GetObject(context.Background(), "main", "big.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var got []byte
	p := make([]byte, 99991)
	for {
		n, err := rc.Read(p)
		got = append(got, p[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("read %d bytes, want the %d written", len(got), len(body))
	}
}
