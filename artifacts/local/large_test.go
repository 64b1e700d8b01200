package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/rlpipe/rlpipe/artifacts"
)

// shardBody is a deterministic body of size bytes, different for each seed.
func shardBody(seed byte, size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i*31) ^ seed
	}
	return b
}

// storeIn creates a store in a new directory, closed when the test ends,
// and returns it and its directory.
func storeIn(t *testing.T) (*Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := Create(context.Background(), dir, "main", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

// fileOf writes b to a new file at path and returns it open for reading,
// closed when the test ends.
func fileOf(t *testing.T, path string, b []byte) *os.File {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// fullDisk is a disk with room for left bytes of blob writes: a write past
// it fails as one on a full disk does (ENOSPC from write(2)).
type fullDisk struct {
	mu   sync.Mutex
	left int64
}

func (d *fullDisk) create(dir, pattern string) (tempFile, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &fullDiskFile{File: f, disk: d}, nil
}

type fullDiskFile struct {
	*os.File
	disk *fullDisk
}

func (f *fullDiskFile) Write(p []byte) (int, error) {
	f.disk.mu.Lock()
	n := min(int64(len(p)), f.disk.left)
	f.disk.left -= n
	f.disk.mu.Unlock()
	m, err := f.File.Write(p[:n])
	if err == nil && m < len(p) {
		err = &fs.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return m, err
}

// ReadFrom copies what fits, as the kernel's copy into a full disk does.
func (f *fullDiskFile) ReadFrom(r io.Reader) (int64, error) {
	f.disk.mu.Lock()
	defer f.disk.mu.Unlock()
	n, err := f.File.ReadFrom(io.LimitReader(r, f.disk.left))
	f.disk.left -= n
	if err == nil && f.disk.left == 0 {
		if m, _ := r.Read(make([]byte, 1)); m > 0 {
			err = &fs.PathError{Op: "copy_file_range", Path: f.Name(), Err: syscall.ENOSPC}
		}
	}
	return n, err
}

// TestDiskFullDuringWeightsCommit writes a weights directory of four
// shards on a disk with room for one and a half: the second shard's put
// fails with ErrNoSpace naming the object, how far it got and what to do;
// nothing is staged or committed for it, no temporary file is left, and
// the store passes Verify. Once there is room again, the same puts and a
// commit succeed, the shard stored before is not written again (its blob
// is the same file), and the directory reads back whole. The shards are
// put from readers, and from files (which the kernel copies).
func TestDiskFullDuringWeightsCommit(t *testing.T) {
	for _, from := range []string{"readers", "files"} {
		t.Run(from, func(t *testing.T) { testDiskFull(t, from == "files") })
	}
}

func testDiskFull(t *testing.T, files bool) {
	ctx := context.Background()
	s, dir := storeIn(t)
	const shard = 2*chunkSize + 100
	var shards [][]byte
	for i := range 4 {
		shards = append(shards, shardBody(byte(i), shard))
	}
	name := func(i int) string { return fmt.Sprintf("weights/model-%05d-of-00004.safetensors", i+1) }
	before, err := s.GetBranch(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	s.blobs.createTemp = (&fullDisk{left: shard + shard/2}).create
	src := t.TempDir()
	putAll := func() error {
		for i, b := range shards {
			var r io.Reader = bytes.NewReader(b)
			if files {
				r = fileOf(t, filepath.Join(src, fmt.Sprint(i)), b)
			}
			if _, err := s.PutObject(ctx, "main", name(i), r, nil); err != nil {
				return err
			}
		}
		_, err := s.Commit(ctx, "main", "weights", nil)
		return err
	}
	err = putAll()
	done := chunkSize // what fits of the chunk that fails
	if files {
		done = shard / 2 // a copy writes what fits
	}
	want := fmt.Sprintf("put main:weights/model-00002-of-00004.safetensors: write blob (%d bytes written): the store's disk is full: no space left on device (free space on the disk of %s and run again: what was written before is kept, and objects stored already are not written again)", done, dir)
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) || err.Error() != want {
		t.Fatalf("put on a full disk:\n got %v\nwant %s", err, want)
	}
	if tmps, _ := os.ReadDir(filepath.Join(dir, tmpDir)); len(tmps) != 0 {
		t.Fatalf("a failed put left %d temporary files in tmp/", len(tmps))
	}
	after, err := s.GetBranch(ctx, "main")
	if err != nil || after.CommitID != before.CommitID {
		t.Fatalf("main moved to %s (%v) after a failed put; want it at %s", after.CommitID, err, before.CommitID)
	}
	var staged []string
	for ch, err := range s.DiffUncommitted(ctx, "main") {
		if err != nil {
			t.Fatal(err)
		}
		staged = append(staged, ch.Path)
	}
	if len(staged) != 1 || staged[0] != name(0) {
		t.Fatalf("staged after the failure: %q, want only %s", staged, name(0))
	}
	res, err := s.Verify(ctx, nil)
	if err != nil || len(res.Damage) != 0 {
		t.Fatalf("verify after a full disk: %v, damage %v", err, res.Damage)
	}
	first, err := os.Stat(s.blobs.path(digestHex(shards[0])))
	if err != nil {
		t.Fatal(err)
	}

	s.blobs.createTemp = nil // space freed
	if err := putAll(); err != nil {
		t.Fatalf("rerun after freeing space: %v", err)
	}
	again, err := os.Stat(s.blobs.path(digestHex(shards[0])))
	if err != nil || !os.SameFile(first, again) {
		t.Fatalf("the shard stored before the failure was written again (%v)", err)
	}
	for i, b := range shards {
		if got := readAll(t, s, "main", name(i)); got != string(b) {
			t.Fatalf("%s read back as %d bytes, want the %d written", name(i), len(got), len(b))
		}
	}
	if res, err := s.Verify(ctx, nil); err != nil || len(res.Damage) != 0 {
		t.Fatalf("verify after the rerun: %v, damage %v", err, res.Damage)
	}
}

// TestUnchangedShardIsNotWrittenAgain commits a shard at iteration 1 and
// again at iteration 2, and counts the temporary files each put creates.
// From a file whose size and first chunk match a stored blob, the second
// put hashes and creates none; from a reader (no size known up front) it
// writes a temporary file and drops it unsynced; a file that matches on
// its first chunk only is written as a new blob. Every way, no temporary
// file is left, the stored blob keeps its file (same inode), and both
// iterations read back.
func TestUnchangedShardIsNotWrittenAgain(t *testing.T) {
	body := shardBody(7, 3*chunkSize+5)
	changed := bytes.Clone(body)
	changed[2*chunkSize] ^= 1 // same size, same first chunk
	for _, tc := range []struct {
		name        string
		second      []byte
		file        bool
		temps       int // temporary files the second put creates
		blobs       int
		sameAsFirst bool
	}{
		{"from a file", body, true, 0, 1, true},
		{"from a reader", body, false, 1, 1, true},
		{"a file changed after its first chunk", changed, true, 1, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := newTestStore(t)
			temps := 0
			s.blobs.createTemp = func(dir, pattern string) (tempFile, error) {
				temps++
				return os.CreateTemp(dir, pattern)
			}
			put := func(it int, b []byte) artifacts.ObjectInfo {
				p := fmt.Sprintf("iterations/%06d/weights/model.safetensors", it)
				var r io.Reader = bytes.NewReader(b)
				if tc.file {
					r = fileOf(t, filepath.Join(t.TempDir(), "model.safetensors"), b)
				}
				info, err := s.PutObject(ctx, "main", p, r, nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.Commit(ctx, "main", p, nil); err != nil {
					t.Fatal(err)
				}
				if got := readAll(t, s, "main", p); got != string(b) {
					t.Fatalf("%s read back as %d bytes", p, len(got))
				}
				return info
			}
			first := put(1, body)
			before, err := os.Stat(s.blobs.path(first.Checksum))
			if err != nil {
				t.Fatal(err)
			}
			temps = 0
			second := put(2, tc.second)
			after, err := os.Stat(s.blobs.path(first.Checksum))
			if err != nil || !os.SameFile(before, after) {
				t.Fatalf("the first shard's blob was replaced (%v)", err)
			}
			if (second.Checksum == first.Checksum) != tc.sameAsFirst {
				t.Fatalf("second put stored %s, first %s", second.Checksum, first.Checksum)
			}
			blobs := 0
			if err := filepath.WalkDir(s.blobs.root, func(_ string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					blobs++
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			left, _ := os.ReadDir(s.blobs.tmp)
			if temps != tc.temps || blobs != tc.blobs || len(left) != 0 {
				t.Fatalf("second put created %d temporary files (%d left), store holds %d blob files; want %d, 0, %d", temps, len(left), blobs, tc.temps, tc.blobs)
			}
		})
	}
}

// TestLargeBlobDamage damages a large blob on disk in each way a disk or
// a hand can, and reads it into a buffer and into a file (where the
// kernel copies the checked bytes): the read fails with ErrIntegrity
// naming the object, the blob and the damage, before handing out a
// damaged byte. Into a file, the bytes before the damage arrive a copy
// segment at a time.
func TestLargeBlobDamage(t *testing.T) {
	const size = 10*chunkSize + 5
	body := shardBody(3, size)
	for _, tc := range []struct {
		name         string
		damage       func(f *os.File) error
		want         string
		good, toFile int // bytes handed out before the error, into a buffer and into a file
	}{
		{"a byte flipped", func(f *os.File) error {
			_, err := f.WriteAt([]byte{^body[9*chunkSize+1]}, 9*chunkSize+1)
			return err
		}, "does not match its checksum at chunk 9 (bytes 9437184 to 10485760)", 9 * chunkSize, copySegment},
		{"truncated", func(f *os.File) error { return f.Truncate(size - 10) },
			"is shorter than its recorded 10485765 bytes (it ends at byte 10485755)", 9 * chunkSize, copySegment},
		{"extended", func(f *os.File) error {
			_, err := f.WriteAt([]byte("x"), size)
			return err
		}, "is longer than its recorded 10485765 bytes", size, size},
	} {
		for _, into := range []string{"buffer", "file"} {
			t.Run(tc.name+" into a "+into, func(t *testing.T) {
				ctx := context.Background()
				s := newTestStore(t)
				info, err := s.PutObject(ctx, "main", "w.bin", bytes.NewReader(body), nil)
				if err != nil {
					t.Fatal(err)
				}
				f, err := os.OpenFile(s.blobs.path(info.Checksum), os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				if err := tc.damage(f); err != nil {
					t.Fatal(err)
				}
				f.Close()
				rc, _, err := s.GetObject(ctx, "main", "w.bin")
				if err != nil {
					t.Fatal(err)
				}
				defer rc.Close()
				got, good := readInto(t, into, rc), tc.good
				if into == "file" {
					good = tc.toFile
				}
				want := "integrity check failed: main:w.bin: blob " + info.Checksum + " " + tc.want + " (corrupted on disk: run `rlpipe fsck` to list the damage; restore the blob from a copy, or delete the object and write it again)"
				if !errors.Is(got.err, artifacts.ErrIntegrity) || got.err.Error() != want {
					t.Fatalf("read a damaged blob:\n got %v\nwant %s", got.err, want)
				}
				if len(got.bytes) != good || !bytes.Equal(got.bytes, body[:good]) {
					t.Fatalf("handed out %d bytes before the error, want the first %d unchanged", len(got.bytes), good)
				}
			})
		}
	}
}

type readResult struct {
	bytes []byte
	err   error
}

// readInto copies rc with io.Copy into a buffer, or into a new file whose
// bytes it then reads back.
func readInto(t *testing.T, into string, rc io.Reader) readResult {
	t.Helper()
	if into == "buffer" {
		var b bytes.Buffer
		_, err := io.Copy(&b, rc)
		return readResult{b.Bytes(), err}
	}
	name := filepath.Join(t.TempDir(), "out")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	_, cerr := io.Copy(f, rc)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return readResult{b, cerr}
}

// TestLargeBlobIntoAFile reads a sound large blob into a file, whole, and
// after a first small Read (the rest goes by the kernel's copy, after the
// part of the chunk read already), and into a file written from an
// offset: each file ends up holding exactly the blob's bytes.
func TestLargeBlobIntoAFile(t *testing.T) {
	const size = 2*copySegment + chunkSize/3
	body := shardBody(5, size)
	ctx := context.Background()
	s := newTestStore(t)
	if _, err := s.PutObject(ctx, "main", "w.bin", bytes.NewReader(body), nil); err != nil {
		t.Fatal(err)
	}
	for _, first := range []int{0, 1000, chunkSize, copySegment + 7} {
		t.Run(fmt.Sprintf("after reading %d bytes", first), func(t *testing.T) {
			rc, _, err := s.GetObject(ctx, "main", "w.bin")
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			head := make([]byte, first)
			if _, err := io.ReadFull(rc, head); err != nil {
				t.Fatal(err)
			}
			name := filepath.Join(t.TempDir(), "out")
			f, err := os.Create(name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write([]byte("prefix")); err != nil {
				t.Fatal(err)
			}
			n, err := io.Copy(f, rc)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil || n != int64(size-first) {
				t.Fatalf("copied %d bytes (%v), want %d", n, err, size-first)
			}
			got, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if want := append([]byte("prefix"), body[first:]...); !bytes.Equal(got, want) {
				t.Fatalf("the file holds %d bytes that differ from the %d expected", len(got), len(want))
			}
			if n, err := rc.Read(head[:min(1, first)]); n != 0 || err != io.EOF {
				t.Fatalf("a read after the copy gave %d bytes, %v; want io.EOF", n, err)
			}
		})
	}
}

// TestVerifyChecksChunkSums damages the chunk CRCs recorded for a sound
// blob: a read fails, Verify reports the blob with what to do, and
// writing the same bytes again records them anew, after which both the
// read and Verify pass.
func TestVerifyChecksChunkSums(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	body := shardBody(9, verifyUpFront+2*chunkSize+17)
	info, err := s.PutObject(ctx, "main", "w.bin", bytes.NewReader(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, "main", "w", nil); err != nil {
		t.Fatal(err)
	}
	err = s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketChunkSums)
		sums := bytes.Clone(b.Get([]byte(info.Checksum)))
		sums[4*2] ^= 0xff // chunk 2
		return b.Put([]byte(info.Checksum), sums)
	})
	if err != nil {
		t.Fatal(err)
	}
	rc, _, err := s.GetObject(ctx, "main", "w.bin")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(io.Discard, rc)
	rc.Close()
	if !errors.Is(err, artifacts.ErrIntegrity) {
		t.Fatalf("read with a damaged chunk checksum: %v, want ErrIntegrity", err)
	}
	res, err := s.Verify(ctx, nil)
	want := "its bytes match their digest but not the checksum of chunk 2 recorded in meta.db, so reads of it fail (write the same bytes to any path again to record its checksums anew)"
	if err != nil || len(res.Damage) != 1 || res.Damage[0].ID != info.Checksum || res.Damage[0].Path != "w.bin" || res.Damage[0].Problem != want {
		t.Fatalf("verify with a damaged chunk checksum: %v, damage %+v; want one blob: %s", err, res.Damage, want)
	}
	if _, err := s.PutObject(ctx, "main", "again.bin", bytes.NewReader(body), nil); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, "main", "w.bin"); got != string(body) {
		t.Fatalf("read back as %d bytes after the rewrite", len(got))
	}
	if res, err := s.Verify(ctx, nil); err != nil || len(res.Damage) != 0 {
		t.Fatalf("verify after the rewrite: %v, damage %+v", err, res.Damage)
	}
}

// TestGCDropsChunkSums: a collection that removes a blob removes its chunk
// CRCs and first-chunk record, and keeps those of a blob still referenced.
func TestGCDropsChunkSums(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	kept, gone := shardBody(1, chunkSize+1), shardBody(2, chunkSize+2)
	for _, p := range []struct {
		path string
		body []byte
	}{{"kept.bin", kept}, {"gone.bin", gone}} {
		if _, err := s.PutObject(ctx, "main", p.path, bytes.NewReader(p.body), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteObject(ctx, "main", "gone.bin"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, "main", "one shard", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(ctx, &artifacts.GCOptions{GracePeriod: -1}); err != nil {
		t.Fatal(err)
	}
	var left, firsts []string
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketFirstChunks).ForEach(func(_, v []byte) error {
			firsts = append(firsts, string(v))
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(bucketChunkSums).ForEach(func(k, _ []byte) error {
			left = append(left, string(k))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0] != digestHex(kept) || len(firsts) != 1 || firsts[0] != digestHex(kept) {
		t.Fatalf("chunk CRCs left after gc: %q, first chunks %q; want only those of kept.bin (%s)", left, firsts, digestHex(kept))
	}
}

// failingReadBack is a temporary blob file whose bytes cannot be read
// back, as on a disk that fails reads.
type failingReadBack struct{ *os.File }

func (f failingReadBack) ReadAt(p []byte, off int64) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: f.Name(), Err: syscall.EIO}
}

// TestPutFileReadBackFails puts a file whose copy in the store cannot be
// read back to be hashed: the put fails at once with the I/O error
// (it used to wait forever), stages nothing and leaves no temporary
// file.
func TestPutFileReadBackFails(t *testing.T) {
	ctx := context.Background()
	s, dir := storeIn(t)
	s.blobs.createTemp = func(dir, pattern string) (tempFile, error) {
		f, err := os.CreateTemp(dir, pattern)
		return failingReadBack{f}, err
	}
	f := fileOf(t, filepath.Join(t.TempDir(), "shard"), shardBody(1, 3*copySegment+5))
	_, err := s.PutObject(ctx, "main", "w.bin", f, nil)
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "put main:w.bin: read back the blob written: ") {
		t.Fatalf("put with a failing read-back: %v", err)
	}
	if tmps, _ := os.ReadDir(filepath.Join(dir, tmpDir)); len(tmps) != 0 {
		t.Fatalf("a failed put left %d temporary files in tmp/", len(tmps))
	}
	for ch, err := range s.DiffUncommitted(ctx, "main") {
		t.Fatalf("staged after a failed put: %v %v", ch, err)
	}
}
