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

// TestDiskFullDuringWeightsCommit writes a weights directory of four
// shards on a disk with room for one and a half: the second shard's put
// fails with ErrNoSpace naming the object, how far it got and what to do;
// nothing is staged or committed for it, no temporary file is left, and
// the store passes Verify. Once there is room again, the same puts and a
// commit succeed, the shard stored before is not written again (its blob
// is the same file), and the directory reads back whole.
func TestDiskFullDuringWeightsCommit(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := Create(ctx, dir, "main", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
	putAll := func() error {
		for i, b := range shards {
			if _, err := s.PutObject(ctx, "main", name(i), bytes.NewReader(b), nil); err != nil {
				return err
			}
		}
		_, err := s.Commit(ctx, "main", "weights", nil)
		return err
	}
	err = putAll()
	want := "put main:weights/model-00002-of-00004.safetensors: write blob (1048576 bytes written): the store's disk is full: no space left on device (free space on the disk of " + dir + " and run again: what was written before is kept, and objects stored already are not written again)"
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
					src := filepath.Join(t.TempDir(), "model.safetensors")
					if err := os.WriteFile(src, b, 0o644); err != nil {
						t.Fatal(err)
					}
					f, err := os.Open(src)
					if err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					r = f
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
// a hand can, and reads it: the read fails with ErrIntegrity naming the
// object, the blob and the damage, before handing out a damaged byte.
func TestLargeBlobDamage(t *testing.T) {
	const size = 2*chunkSize + verifyUpFront
	body := shardBody(3, size)
	for _, tc := range []struct {
		name   string
		damage func(f *os.File) error
		want   string
		good   int // bytes handed out before the error
	}{
		{"a byte flipped", func(f *os.File) error {
			_, err := f.WriteAt([]byte{^body[chunkSize+1]}, chunkSize+1)
			return err
		}, "does not match its checksum at chunk 1 (bytes 1048576 to 2097152)", chunkSize},
		{"truncated", func(f *os.File) error { return f.Truncate(size - 10) },
			"is shorter than its recorded 6291456 bytes (it ends at byte 6291446)", 5 * chunkSize},
		{"extended", func(f *os.File) error {
			_, err := f.WriteAt([]byte("x"), size)
			return err
		}, "is longer than its recorded 6291456 bytes", size},
	} {
		t.Run(tc.name, func(t *testing.T) {
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
			var got bytes.Buffer
			_, err = io.Copy(&got, rc)
			want := "integrity check failed: main:w.bin: blob " + info.Checksum + " " + tc.want + " (corrupted on disk: run `rlpipe fsck` to list the damage; restore the blob from a copy, or delete the object and write it again)"
			if !errors.Is(err, artifacts.ErrIntegrity) || err.Error() != want {
				t.Fatalf("read a damaged blob:\n got %v\nwant %s", err, want)
			}
			if got.Len() != tc.good || !bytes.Equal(got.Bytes(), body[:tc.good]) {
				t.Fatalf("handed out %d bytes before the error, want the first %d unchanged", got.Len(), tc.good)
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
