package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/maphash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
)

// blobStore keeps content-addressed bytes: blobs/<2 hex>/<64 hex>, named
// by their SHA-256. Identical bytes are stored once. A write goes to a
// temporary file that is synced and renamed into place, so a blob is
// either whole or absent.
type blobStore struct {
	root, tmp string
	// createTemp opens the temporary file of a write; nil means
	// os.CreateTemp. Tests set it to inject faults (a full disk).
	createTemp func(dir, pattern string) (tempFile, error)
}

// tempFile is what put and putFile need of the file they write.
type tempFile interface {
	io.Writer
	io.ReaderFrom
	io.ReaderAt
	Sync() error
	Close() error
	Name() string
}

func (b *blobStore) path(digest string) string {
	return filepath.Join(b.root, digest[:2], digest)
}

// written is a blob that put wrote or found stored: its digest, its size
// and the CRC-32C of each chunkSize chunk (chunkSums), recorded with the
// object so that a read checks each chunk in one pass (see open).
type written struct {
	digest string
	size   int64
	sums   []byte
}

// put streams r into the store once: each chunk read is written to a
// temporary file in tmp/ (on the file system of blobs/) while another
// goroutine hashes it, so the SHA-256 costs no pass of its own and, on
// two cores, little time. A blob stored already is not synced, renamed
// or kept (see keep).
func (b *blobStore) put(ctx context.Context, r io.Reader) (w written, err error) {
	f, err := b.createTmp()
	if err != nil {
		return written{}, err
	}
	defer discardOnError(f, &err)
	h := newHashPipe()
	defer h.finish()
	for {
		if err := ctx.Err(); err != nil {
			return written{}, fmt.Errorf("write blob: %w", err)
		}
		buf := h.buffer()
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			w.sums = binary.BigEndian.AppendUint32(w.sums, crc32.Checksum(buf[:n], castagnoli))
			h.hash(buf[:n]) // hashed while it is written
			if _, err := f.Write(buf[:n]); err != nil {
				return written{}, b.writeErr(err, w.size)
			}
			w.size += int64(n)
		} else {
			h.release(buf)
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return written{}, fmt.Errorf("read: %w", rerr)
		}
	}
	w.digest = hex.EncodeToString(h.finish())
	return w, b.keep(f, w)
}

// putFile is put for a regular file, read from its current offset to its
// end: the kernel copies it into the temporary file a segment at a time
// ((*os.File).ReadFrom: copy_file_range on Linux, no pass through user
// space), while another goroutine reads each copied segment back from
// the page cache, noting its chunk CRCs and hashing it. The digest so
// names the bytes stored, whatever happens to src meanwhile, and on two
// cores the copy costs little beside the hash.
func (b *blobStore) putFile(ctx context.Context, src *os.File) (w written, err error) {
	f, err := b.createTmp()
	if err != nil {
		return written{}, err
	}
	defer discardOnError(f, &err)
	copied := make(chan int64, 8) // bytes of f written so far
	failed := make(chan struct{}) // closed when the hasher gives up
	hashed := make(chan written, 1)
	herr := make(chan error, 1)
	go func() {
		var (
			h    = sha256.New()
			buf  = chunkBuffer()
			hw   written
			done int64
			err  error
		)
		defer putChunkBuffer(buf)
		chunk := func(n int64) {
			if _, err = f.ReadAt(buf[:n], done); err != nil {
				err = fmt.Errorf("read back the blob written: %w", err)
				close(failed)
				return
			}
			hw.sums = binary.BigEndian.AppendUint32(hw.sums, crc32.Checksum(buf[:n], castagnoli))
			h.Write(buf[:n])
			done += n
		}
		var end int64
		for end = range copied {
			for err == nil && end-done >= chunkSize {
				chunk(chunkSize)
			}
		}
		if err == nil && end > done {
			chunk(end - done)
		}
		hw.digest, hw.size = hex.EncodeToString(h.Sum(nil)), done
		herr <- err
		hashed <- hw
	}()
	var size int64
loop:
	for {
		if err = ctx.Err(); err != nil {
			err = fmt.Errorf("write blob: %w", err)
			break
		}
		var n int64
		n, err = f.ReadFrom(io.LimitReader(src, copySegment))
		if n > 0 {
			startWriteback(f, size, n)
			size += n
			select {
			case copied <- size:
			case <-failed:
				err = nil // the hasher's error says why
				break loop
			}
		}
		if err != nil {
			err = b.writeErr(err, size)
			break
		}
		if n < copySegment {
			break // the end of src
		}
	}
	close(copied)
	if herr := <-herr; err == nil {
		err = herr
	}
	w = <-hashed
	if err != nil {
		return written{}, err
	}
	return w, b.keep(f, w)
}

// copySegment is the unit in which putFile copies a file into the store
// and hands it to its hasher: a multiple of chunkSize.
const copySegment = 8 * chunkSize

// discardOnError closes and removes the temporary file f when *err is
// set.
func discardOnError(f tempFile, err *error) {
	if *err != nil {
		f.Close()
		os.Remove(f.Name())
	}
}

// createTmp opens a new temporary file in tmp/.
func (b *blobStore) createTmp() (tempFile, error) {
	create := b.createTemp
	if create == nil {
		create = func(dir, pattern string) (tempFile, error) { return os.CreateTemp(dir, pattern) }
	}
	f, err := create(b.tmp, "put-*")
	if err != nil {
		return nil, b.writeErr(err, 0)
	}
	return f, nil
}

// keep makes the temporary file f, holding w, the blob named by w's
// digest, and closes it. A blob stored already is not synced, renamed
// or kept: f is deleted, so bytes that did not change cost their hashing
// and a copy into the page cache, not a write to the disk (from put; a
// putFile has started writing f back as it copied, so some of it may
// have reached the disk). A new blob is synced, renamed into its content
// address and its directory synced. On an error f is left for the
// caller to close and remove.
func (b *blobStore) keep(f tempFile, w written) error {
	dst := b.path(w.digest)
	if _, statErr := os.Stat(dst); statErr == nil {
		// Stored already. Refresh its time so a collection running now
		// treats it as young (see GCOptions.GracePeriod).
		f.Close()
		os.Remove(f.Name())
		now := time.Now()
		_ = os.Chtimes(dst, now, now)
		return nil
	}
	if err := f.Sync(); err != nil {
		return b.writeErr(err, w.size)
	}
	if err := f.Close(); err != nil {
		return b.writeErr(err, w.size)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return b.writeErr(err, w.size)
	}
	if err := os.Rename(f.Name(), dst); err != nil {
		return b.writeErr(err, w.size)
	}
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return b.writeErr(err, w.size)
	}
	return nil
}

// stored hashes r, noting its chunk CRCs, and says whether a blob of its
// digest is stored (refreshing its time, as put does); it writes nothing.
func (b *blobStore) stored(ctx context.Context, r io.Reader) (w written, ok bool, err error) {
	buf := chunkBuffer()
	defer putChunkBuffer(buf)
	h := sha256.New()
	for {
		if err := ctx.Err(); err != nil {
			return written{}, false, fmt.Errorf("read: %w", err)
		}
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			w.sums = binary.BigEndian.AppendUint32(w.sums, crc32.Checksum(buf[:n], castagnoli))
			h.Write(buf[:n])
			w.size += int64(n)
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return written{}, false, fmt.Errorf("read: %w", rerr)
		}
	}
	w.digest = hex.EncodeToString(h.Sum(nil))
	dst := b.path(w.digest)
	if _, err := os.Stat(dst); err != nil {
		return w, false, nil
	}
	now := time.Now()
	_ = os.Chtimes(dst, now, now)
	return w, true, nil
}

// writeErr describes a failed write of a blob, after done bytes; a full
// disk is ErrNoSpace with what to do next.
func (b *blobStore) writeErr(err error, done int64) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the temporary file's name tells the user nothing
		}
		return fmt.Errorf("write blob (%d bytes written): %w: %w (free space on the disk of %s and run again: what was written before is kept, and objects stored already are not written again)", done, ErrNoSpace, err, filepath.Dir(b.root))
	}
	return fmt.Errorf("write blob: %w", err)
}

// ErrNoSpace is a write the store's disk had no room for. Nothing is
// half-written: the object's temporary file is removed and no commit
// names it.
var ErrNoSpace = errors.New("the store's disk is full")

// hashPipe hashes, on its own goroutine, the chunks put writes: a chunk
// handed to hash goes back to the pool of buffers once hashed.
type hashPipe struct {
	free   chan []byte
	work   chan []byte
	sum    chan []byte
	digest []byte
	done   bool
}

// pipeDepth is the number of chunk buffers of a put: the one being
// read and written and those waiting to be hashed.
const pipeDepth = 3

func newHashPipe() *hashPipe {
	p := &hashPipe{free: make(chan []byte, pipeDepth), work: make(chan []byte, pipeDepth), sum: make(chan []byte, 1)}
	for range pipeDepth {
		p.free <- chunkBuffer()
	}
	go func(work <-chan []byte, free, sum chan<- []byte) {
		h := sha256.New()
		for c := range work {
			h.Write(c)
			free <- c[:cap(c)]
		}
		sum <- h.Sum(nil)
	}(p.work, p.free, p.sum)
	return p
}

// buffer returns a free chunk buffer, waiting for the hasher if need be.
func (p *hashPipe) buffer() []byte { return <-p.free }

// release returns an unused buffer.
func (p *hashPipe) release(c []byte) { p.free <- c }

// hash hands c to the hasher; c is not to be written until it comes back
// from buffer.
func (p *hashPipe) hash(c []byte) { p.work <- c }

// finish waits for the hasher and returns the SHA-256 of every chunk
// hashed; the buffers go back to the shared pool.
func (p *hashPipe) finish() []byte {
	if !p.done {
		p.done = true
		close(p.work)
		p.digest = <-p.sum
		for range pipeDepth {
			putChunkBuffer(<-p.free)
		}
	}
	return p.digest
}

// syncDir fsyncs a directory (or a file: the benchmarks sync what cp
// copied with it).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// open returns a reader of the blob that never hands out a byte that
// does not match digest and size, or its chunk CRCs: it fails with
// ErrIntegrity instead.
//
// Blobs up to verifyUpFront are read and checked whole before the first
// byte is returned. A larger one with its chunk CRCs (sums, see
// chunksums.go) is read once, each chunk handed out once it matches its
// CRC. A larger one without (written before they existed) is read twice:
// the first pass checks its SHA-256 and notes a fingerprint of each
// chunk; the second hands out a chunk only once it matches the
// fingerprint the first pass noted, so bytes that change on disk between
// the passes stop the read at the chunk before them.
func (b *blobStore) open(ctx context.Context, digest string, size int64, sums []byte, what string) (io.ReadCloser, error) {
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
	if sums != nil {
		return newSumReader(f, digest, size, sums, what), nil
	}
	c := &chunkReader{chunkStream: chunkStream{buf: make([]byte, chunkSize)}, f: f, seed: maphash.MakeSeed(), digest: digest, what: what}
	c.fill = c.check
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
	chunkStream
	f      *os.File
	seed   maphash.Seed
	sums   []uint64 // fingerprint of each chunk, from the first pass
	next   int      // index of the next chunk to read
	digest string
	what   string
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

// check reads and checks the next chunk into buf.
func (c *chunkReader) check() (int, error) {
	if c.next == len(c.sums) {
		return 0, io.EOF
	}
	n, err := io.ReadFull(c.f, c.buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !(errors.Is(err, io.EOF) && n == 0) {
		return 0, fmt.Errorf("read %s: blob %s: %w", c.what, c.digest, err)
	}
	if maphash.Bytes(c.seed, c.buf[:n]) != c.sums[c.next] {
		return 0, corrupted(c.what, c.digest, fmt.Sprintf("changed on disk while it was read (chunk %d, at byte %d)", c.next, int64(c.next)*chunkSize))
	}
	c.next++
	return n, nil
}

// chunkStream hands out, through Read and WriteTo, the chunks that fill
// reads and checks into buf, one at a time; fill returns io.EOF after
// the last chunk, or the error that stops the read.
type chunkStream struct {
	buf    []byte // the current chunk, checked
	off, n int    // bytes of buf handed out, bytes in buf
	err    error
	fill   func() (int, error)
}

// advance makes the next chunk current.
func (c *chunkStream) advance() error {
	n, err := c.fill()
	if err != nil {
		return err
	}
	c.n, c.off = n, 0
	return nil
}

func (c *chunkStream) Read(p []byte) (int, error) {
	for c.off == c.n {
		if c.err != nil {
			return 0, c.err
		}
		if c.err = c.advance(); c.err != nil {
			return 0, c.err
		}
	}
	n := copy(p, c.buf[c.off:c.n])
	c.off += n
	return n, nil
}

// WriteTo writes each checked chunk straight from the buffer (io.Copy
// uses it, and so does (*os.File).ReadFrom).
func (c *chunkStream) WriteTo(w io.Writer) (int64, error) {
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
			c.err = c.advance()
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
