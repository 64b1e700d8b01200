package local

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
)

// blobStore keeps content-addressed bytes: blobs/<2 hex>/<64 hex>, named
// by their SHA-256. Identical bytes are stored once. A write goes to a
// temporary file that is synced and renamed into place, so a blob is
// either whole or absent.
type blobStore struct {
	root, tmp string
}

func (b *blobStore) path(digest string) string {
	return filepath.Join(b.root, digest[:2], digest)
}

// put streams r into the store and returns its digest and size.
func (b *blobStore) put(r io.Reader) (digest string, size int64, err error) {
	f, err := os.CreateTemp(b.tmp, "put-*")
	if err != nil {
		return "", 0, fmt.Errorf("write blob: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	h := sha256.New()
	size, err = io.Copy(io.MultiWriter(f, h), r)
	if err != nil {
		return "", 0, fmt.Errorf("write blob: %w", err)
	}
	if err = f.Sync(); err != nil {
		return "", 0, fmt.Errorf("write blob: %w", err)
	}
	if err = f.Close(); err != nil {
		return "", 0, fmt.Errorf("write blob: %w", err)
	}
	digest = hex.EncodeToString(h.Sum(nil))
	dst := b.path(digest)
	if _, statErr := os.Stat(dst); statErr == nil {
		// Stored already. Refresh its time so a collection running now
		// treats it as young (see GCOptions.GracePeriod).
		os.Remove(tmp)
		now := time.Now()
		_ = os.Chtimes(dst, now, now)
		return digest, size, nil
	}
	if err = os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", 0, fmt.Errorf("write blob: %w", err)
	}
	if err = os.Rename(tmp, dst); err != nil {
		return "", 0, fmt.Errorf("write blob: %w", err)
	}
	if err = syncDir(filepath.Dir(dst)); err != nil {
		return "", 0, fmt.Errorf("write blob: %w", err)
	}
	return digest, size, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// open returns a reader that checks the bytes against digest and size as
// they stream, and fails with ErrIntegrity instead of io.EOF on mismatch.
func (b *blobStore) open(digest string, size int64, what string) (io.ReadCloser, error) {
	f, err := os.Open(b.path(digest))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s: blob %s is missing from the store", artifacts.ErrIntegrity, what, digest)
		}
		return nil, err
	}
	v := &verifyingReader{f: f, h: sha256.New(), digest: digest, size: size, what: what}
	if size > verifyUpFront {
		return v, nil
	}
	// Small objects are checked whole before the first byte is handed out.
	defer f.Close()
	data, err := io.ReadAll(v)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// verifyUpFront is the size up to which open verifies a blob before
// returning any of it; larger blobs are verified as they stream and the
// last Read reports ErrIntegrity instead of io.EOF.
const verifyUpFront = 4 << 20

// openRange returns length bytes from offset without verification.
func (b *blobStore) openRange(digest string, offset, length int64, what string) (io.ReadCloser, error) {
	f, err := os.Open(b.path(digest))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s: blob %s is missing from the store", artifacts.ErrIntegrity, what, digest)
		}
		return nil, err
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	if length < 0 {
		return f, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(f, length), f}, nil
}

type verifyingReader struct {
	f      *os.File
	h      hash.Hash
	n      int64
	digest string
	size   int64
	what   string
	err    error
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.f.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if v.n > v.size {
		v.err = fmt.Errorf("%w: %s: blob %s is longer than its recorded %d bytes", artifacts.ErrIntegrity, v.what, v.digest, v.size)
		return 0, v.err
	}
	if errors.Is(err, io.EOF) {
		got := hex.EncodeToString(v.h.Sum(nil))
		if v.n != v.size || got != v.digest {
			v.err = fmt.Errorf("%w: %s: blob %s read back as %d bytes with digest %s (corrupted on disk: restore it from a copy, or delete the object and write it again)", artifacts.ErrIntegrity, v.what, v.digest, v.n, got)
			return 0, v.err
		}
		v.err = io.EOF
	}
	return n, err
}

func (v *verifyingReader) Close() error { return v.f.Close() }
