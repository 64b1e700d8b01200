package local

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
)

// onlyWriter hides a destination's ReadFrom, so io.Copy uses the
// source's WriteTo.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(p []byte) (int, error) { return o.w.Write(p) }

// TestLargeBlobStopsBeforeAChunkThatChanged changes a byte of a large
// blob on disk after its first pass (the SHA-256 check) and before the
// second: the reader hands out exactly the chunks before the changed one,
// then ErrIntegrity naming the object and the chunk, whether it is read
// with Read or copied with WriteTo.
func TestLargeBlobStopsBeforeAChunkThatChanged(t *testing.T) {
	const size = 5*chunkSize + 123
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(i * 7)
	}
	changed := int64(3*chunkSize + 10)
	for _, tc := range []struct {
		name string
		read func(r io.Reader) ([]byte, error)
	}{
		{"Read", io.ReadAll},
		{"WriteTo", func(r io.Reader) ([]byte, error) {
			var buf bytes.Buffer
			_, err := io.Copy(onlyWriter{&buf}, r)
			return buf.Bytes(), err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Create(context.Background(), filepath.Join(t.TempDir(), "store"), "main", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			info, err := s.PutObject(context.Background(), "main", "big.bin", bytes.NewReader(body), nil)
			if err != nil {
				t.Fatal(err)
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
			if !errors.Is(err, artifacts.ErrIntegrity) || !strings.Contains(err.Error(), "main:big.bin") || !strings.Contains(err.Error(), "chunk 3") {
				t.Fatalf("read a blob changed between the passes: %v, want ErrIntegrity naming main:big.bin and chunk 3", err)
			}
			if len(got) != 3*chunkSize || !bytes.Equal(got, body[:3*chunkSize]) {
				t.Fatalf("read %d bytes before the error, want the first %d bytes unchanged", len(got), 3*chunkSize)
			}
		})
	}
}

// TestLargeBlobReadsWhole reads a large blob that is sound, in odd-sized
// pieces, across chunk boundaries.
func TestLargeBlobReadsWhole(t *testing.T) {
	body := bytes.Repeat([]byte("abcdefg"), verifyUpFront/7+chunkSize)[:verifyUpFront+chunkSize/3]
	s, err := Create(context.Background(), filepath.Join(t.TempDir(), "store"), "main", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
