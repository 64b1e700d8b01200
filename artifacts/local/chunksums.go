package local

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// A blob written by put has, beside its SHA-256, the CRC-32C of each of
// its chunkSize chunks, computed from the same bytes in the same pass and
// kept in meta.db (bucket chunksums: SHA-256 hex → 4 bytes a chunk, big
// endian). A read of a large blob then checks each chunk against its CRC
// before handing it out, in one pass over the file at the speed of a copy
// (CRC-32C runs at tens of GB/s where SHA-256 runs at about 1 GB/s), where
// a blob without them (written before they existed) is read twice: a
// SHA-256 pass, then the bytes (see blobStore.open). The SHA-256 stays the
// object's name and what `rlpipe fsck` checks; the chunk CRCs catch bytes
// that changed on disk since they were hashed, with one chance in 2³² of
// missing a random change within a chunk, and every change of up to 32
// consecutive bits.

// bucketChunkSums holds the chunk CRCs of blobs: SHA-256 hex → CRCs.
var bucketChunkSums = []byte("chunksums")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// chunkBuffers pools the chunkSize buffers of puts and reads.
var chunkBuffers = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

func chunkBuffer() []byte { return *chunkBuffers.Get().(*[]byte) }

func putChunkBuffer(b []byte) {
	b = b[:cap(b)]
	chunkBuffers.Put(&b)
}

// putChunkSums records the chunk CRCs of digest, computed from bytes
// that hashed to it (a record that differs, damaged, is replaced), and
// the blob under its size and first chunk's CRC in firstchunks.
func putChunkSums(tx *bolt.Tx, digest string, size int64, sums []byte) error {
	b, err := tx.CreateBucketIfNotExists(bucketChunkSums)
	if err != nil {
		return err
	}
	if !bytes.Equal(b.Get([]byte(digest)), sums) {
		if err := b.Put([]byte(digest), sums); err != nil {
			return err
		}
	}
	if len(sums) < 4 {
		return nil
	}
	fc, err := tx.CreateBucketIfNotExists(bucketFirstChunks)
	if err != nil {
		return err
	}
	return fc.Put(firstChunkKey(size, binary.BigEndian.Uint32(sums)), []byte(digest))
}

// bucketFirstChunks maps a blob's size and the CRC-32C of its first chunk
// (12 bytes: size, CRC, big endian) to its SHA-256 hex, the last one
// recorded: a file of that size and first chunk is probably stored
// already, and is hashed before it is written (Store.putStored).
var bucketFirstChunks = []byte("firstchunks")

func firstChunkKey(size int64, crc uint32) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, uint64(size)), crc)
}

// getChunkSums returns a copy of the chunk CRCs of a blob of size bytes,
// or nil when none are recorded or they do not fit its size.
func getChunkSums(tx *bolt.Tx, digest string, size int64) []byte {
	b := tx.Bucket(bucketChunkSums)
	if b == nil {
		return nil
	}
	sums := b.Get([]byte(digest))
	if int64(len(sums)) != 4*chunksOf(size) {
		return nil
	}
	return append([]byte(nil), sums...)
}

// chunksOf is the number of chunks of a blob of size bytes.
func chunksOf(size int64) int64 { return (size + chunkSize - 1) / chunkSize }

// sumReader reads a blob in one pass, handing out each chunk only once its
// CRC-32C matches the one recorded when the blob was written.
type sumReader struct {
	chunkStream
	f      *os.File
	sums   []byte
	next   int64 // index of the next chunk
	size   int64
	digest string
	what   string
}

func newSumReader(f *os.File, digest string, size int64, sums []byte, what string) *sumReader {
	c := &sumReader{chunkStream: chunkStream{buf: chunkBuffer()}, f: f, sums: sums, size: size, digest: digest, what: what}
	c.fill = c.check
	return c
}

// check reads and checks the next chunk into buf.
func (c *sumReader) check() (int, error) {
	if c.next == chunksOf(c.size) {
		var one [1]byte
		if n, _ := c.f.Read(one[:]); n > 0 {
			return 0, corrupted(c.what, c.digest, fmt.Sprintf("is longer than its recorded %d bytes", c.size))
		}
		return 0, io.EOF
	}
	want := min(chunkSize, c.size-c.next*chunkSize)
	n, err := io.ReadFull(c.f, c.buf[:want])
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF
	}
	if err := c.checkChunk(c.next, c.buf[:n], err); err != nil {
		return 0, err
	}
	c.next++
	return n, nil
}

// WriteTo hands the blob to w. When w is a regular file, the kernel
// copies the blob into it ((*os.File).ReadFrom: copy_file_range on
// Linux), so the bytes never pass through user space, while another
// goroutine checks the chunk CRCs at most two segments ahead of the
// copy, which copies only segments checked already. The copy reads the
// bytes again after their check, from the page cache the check just
// filled: damage on the disk is caught as on the buffered path, but a
// write into the blob's file by another process in that moment would go
// through unchecked, where the buffered path hands out exactly the bytes
// it checked. Any other writer (a pipe, a socket, a buffer) takes the
// buffered path.
func (c *sumReader) WriteTo(w io.Writer) (int64, error) {
	dst, ok := w.(*os.File)
	if ok {
		fi, err := dst.Stat()
		ok = err == nil && fi.Mode().IsRegular()
	}
	if !ok || c.err != nil {
		return c.chunkStream.WriteTo(w)
	}
	var total int64
	if c.off < c.n { // the rest of a chunk read already
		n, err := dst.Write(c.buf[c.off:c.n])
		c.off += n
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	var (
		checked = make(chan int64, 1) // chunks checked so far
		errc    = make(chan error, 1)
		stop    = make(chan struct{})
		chunks  = chunksOf(c.size)
	)
	go func(next int64) {
		defer close(checked)
		buf := chunkBuffer()
		defer putChunkBuffer(buf)
		for ; next < chunks; next++ {
			start := next * chunkSize
			n, err := c.f.ReadAt(buf[:min(chunkSize, c.size-start)], start)
			if err := c.checkChunk(next, buf[:n], err); err != nil {
				errc <- err
				return
			}
			if (next+1)%(copySegment/chunkSize) == 0 || next+1 == chunks {
				select {
				case checked <- next + 1:
				case <-stop:
					errc <- nil
					return
				}
			}
		}
		var one [1]byte
		if n, _ := c.f.ReadAt(one[:], c.size); n > 0 {
			errc <- corrupted(c.what, c.digest, fmt.Sprintf("is longer than its recorded %d bytes", c.size))
			return
		}
		errc <- nil
	}(c.next)
	for upTo := range checked {
		want := min(upTo*chunkSize, c.size) - c.next*chunkSize
		n, err := dst.ReadFrom(io.LimitReader(c.f, want))
		total += n
		if err == nil && n < want {
			err = corrupted(c.what, c.digest, fmt.Sprintf("is shorter than its recorded %d bytes", c.size))
		}
		if err != nil {
			close(stop)
			for range checked {
			}
			<-errc
			c.err = err
			return total, err
		}
		c.next = upTo
	}
	if err := <-errc; err != nil {
		c.err = err
		return total, err
	}
	c.err = io.EOF
	return total, nil
}

// checkChunk checks chunk i, read as p with err, against its CRC.
func (c *sumReader) checkChunk(i int64, p []byte, err error) error {
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read %s: blob %s: %w", c.what, c.digest, err)
	}
	if want := min(chunkSize, c.size-i*chunkSize); int64(len(p)) < want {
		return corrupted(c.what, c.digest, fmt.Sprintf("is shorter than its recorded %d bytes (it ends at byte %d)", c.size, i*chunkSize+int64(len(p))))
	}
	if crc32.Checksum(p, castagnoli) != binary.BigEndian.Uint32(c.sums[4*i:]) {
		return corrupted(c.what, c.digest, fmt.Sprintf("does not match its checksum at chunk %d (bytes %d to %d)", i, i*chunkSize, i*chunkSize+int64(len(p))))
	}
	return nil
}

func (c *sumReader) Close() error {
	if c.buf != nil {
		putChunkBuffer(c.buf)
		c.buf, c.off, c.n = nil, 0, 0
		c.err = fmt.Errorf("read %s: %w", c.what, os.ErrClosed)
	}
	return c.f.Close()
}
