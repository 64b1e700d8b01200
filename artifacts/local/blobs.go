package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/maphash"
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

// open returns a reader of the blob that never hands out a byte that
// does not match digest and size: it fails with ErrIntegrity instead.
//
// Blobs up to verifyUpFront are read and checked whole before the first
// byte is returned. A larger one is read twice: the first pass checks its
// SHA-256 and notes a fingerprint of each chunk; the second hands out a
// chunk only once it matches the fingerprint the first pass noted, so
// bytes that change on disk between the passes stop the read at the
// chunk before them.
func (b *blobStore) open(ctx context.Context, digest string, size int64, what string) (io.ReadCloser, error) {
	f, err := os.Open(b.path(digest))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s: blob %s is missing from the store", artifacts.ErrIntegrity, what, digest)
		}
		return nil, err
	}
	if size <= verifyUpFront {
		defer f.Close()
		data, err := io.ReadAll(&verifyingReader{f: f, h: sha256.New(), digest: digest, size: size, what: what})
		if err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(data)), nil
	}
	c := &chunkReader{f: f, seed: maphash.MakeSeed(), buf: make([]byte, chunkSize), digest: digest, what: what}
	if err := c.fingerprint(ctx, size); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

// verifyUpFront is the size up to which open reads a blob once, checking
// it whole before returning any of it; larger blobs are read in two
// passes (see open).
const verifyUpFront = 4 << 20

// chunkSize is the unit in which the second pass over a large blob is
// checked and handed out.
const chunkSize = 1 << 20

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
			v.err = corrupted(v.what, v.digest, fmt.Sprintf("read back as %d bytes with digest %s", v.n, got))
			return 0, v.err
		}
		v.err = io.EOF
	}
	return n, err
}

// chunkReader streams a large blob whose SHA-256 was checked by its first
// pass (fingerprint), handing out each chunk only once it matches the
// fingerprint taken then. The fingerprints are keyed 64-bit hashes
// (hash/maphash, a seed per read), kept in memory only: the SHA-256
// vouches for the content, the fingerprints that the second pass reads
// the same bytes, at a small fraction of the cost of hashing twice.
type chunkReader struct {
	f      *os.File
	seed   maphash.Seed
	sums   []uint64 // fingerprint of each chunk, from the first pass
	buf    []byte   // the current chunk, verified
	off    int      // bytes of buf handed out
	n      int      // bytes in buf
	next   int      // index of the next chunk to read
	digest string
	what   string
	err    error
}

// fingerprint is the first pass: it checks the blob's size and SHA-256
// and notes each chunk's fingerprint.
func (c *chunkReader) fingerprint(ctx context.Context, size int64) error {
	h := sha256.New()
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read %s: %w", c.what, err)
		}
		n, err := io.ReadFull(c.f, c.buf)
		if n > 0 {
			h.Write(c.buf[:n])
			c.sums = append(c.sums, maphash.Bytes(c.seed, c.buf[:n]))
			total += int64(n)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read %s: blob %s: %w", c.what, c.digest, err)
		}
		if total > size {
			return fmt.Errorf("%w: %s: blob %s is longer than its recorded %d bytes", artifacts.ErrIntegrity, c.what, c.digest, size)
		}
	}
	if got := hex.EncodeToString(h.Sum(nil)); total != size || got != c.digest {
		return corrupted(c.what, c.digest, fmt.Sprintf("read back as %d bytes with digest %s", total, got))
	}
	return nil
}

// corrupted is the error for a blob whose bytes are not the ones stored.
func corrupted(what, digest, how string) error {
	return fmt.Errorf("%w: %s: blob %s %s (corrupted on disk: run `rlpipe fsck` to list the damage; restore the blob from a copy, or delete the object and write it again)", artifacts.ErrIntegrity, what, digest, how)
}

// fill reads and checks the next chunk into buf.
func (c *chunkReader) fill() error {
	if c.next == len(c.sums) {
		return io.EOF
	}
	n, err := io.ReadFull(c.f, c.buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !(errors.Is(err, io.EOF) && n == 0) {
		return fmt.Errorf("read %s: blob %s: %w", c.what, c.digest, err)
	}
	if maphash.Bytes(c.seed, c.buf[:n]) != c.sums[c.next] {
		return corrupted(c.what, c.digest, fmt.Sprintf("changed on disk while it was read (chunk %d, at byte %d)", c.next, int64(c.next)*chunkSize))
	}
	c.n, c.off = n, 0
	c.next++
	return nil
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for c.off == c.n {
		if c.err != nil {
			return 0, c.err
		}
		if c.err = c.fill(); c.err != nil {
			return 0, c.err
		}
	}
	n := copy(p, c.buf[c.off:c.n])
	c.off += n
	return n, nil
}

// WriteTo writes each verified chunk straight from the buffer (io.Copy
// uses it).
func (c *chunkReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if c.off < c.n {
			n, err := w.Write(c.buf[c.off:c.n])
			c.off += n
			total += int64(n)
			if err != nil {
				return total, err
			}
		}
		if c.err == nil {
			c.err = c.fill()
		}
		if errors.Is(c.err, io.EOF) {
			return total, nil
		}
		if c.err != nil {
			return total, c.err
		}
	}
}

func (c *chunkReader) Close() error { return c.f.Close() }
