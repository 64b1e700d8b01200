package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// bigBody is an object of several read chunks (1 MiB each), larger than
// what the embedded store checks in one pass.
func bigBody() []byte {
	b := make([]byte, 6<<20+321)
	for i := range b {
		b[i] = byte(i*31 + i>>11)
	}
	return b
}

// storeWithBig is a store whose main holds a.txt and big.bin, committed.
func storeWithBig(t *testing.T) (*harness, []byte, string) {
	t.Helper()
	h := newStore(t)
	body := bigBody()
	h.ok("put", h.file("big.bin", string(body)), "main:big.bin")
	h.ok("put", h.file("a.txt", "hello\n"), "main:a.txt")
	h.ok("commit", "main", "-m", "add big")
	sum := sha256.Sum256(body)
	return h, body, hex.EncodeToString(sum[:])
}

func (h *harness) blobPath(digest string) string {
	return filepath.Join(h.store, "blobs", digest[:2], digest)
}

// flipBlobByte flips the byte at off of the blob named digest.
func (h *harness) flipBlobByte(digest string, off int64) {
	h.t.Helper()
	f, err := os.OpenFile(h.blobPath(digest), os.O_RDWR, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		h.t.Fatal(err)
	}
	b[0] ^= 0x20
	if _, err := f.WriteAt(b, off); err != nil {
		h.t.Fatal(err)
	}
}

// editMeta changes the store's metadata directly: fn gets the bucket of
// the embedded store's format (FORMAT.md) that holds the records.
func (h *harness) editMeta(bucket string, fn func(b *bolt.Bucket) error) {
	h.t.Helper()
	db, err := bolt.Open(filepath.Join(h.store, "meta.db"), 0o644, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error { return fn(tx.Bucket([]byte(bucket))) }); err != nil {
		h.t.Fatal(err)
	}
}

// TestCatAndExportOfACorruptedLargeObjectEmitNothingWrong flips a byte in
// the middle of a 6 MiB object's blob: cat and export fail naming the
// object, and no byte reaches standard output (the store finds the damage
// before it hands out the first chunk), and export leaves no file.
func TestCatAndExportOfACorruptedLargeObjectEmitNothingWrong(t *testing.T) {
	h, body, digest := storeWithBig(t)
	h.flipBlobByte(digest, int64(len(body)/2))
	for _, args := range [][]string{
		{"cat", "main:big.bin"},
		{"cat", "main:big.bin", "--raw"},
		{"export", "main:big.bin", "-"},
	} {
		r := h.run(args...)
		if r.code != ExitFailure || !strings.Contains(r.stderr, "main:big.bin: blob "+digest) || !strings.Contains(r.stderr, "rlpipe fsck") {
			t.Errorf("rlpipe %s: exit %d, stderr %q; want exit 1 naming main:big.bin, its blob and fsck", strings.Join(args, " "), r.code, r.stderr)
		}
		// What reached stdout must be a prefix of the object; with the
		// whole-blob check first it is empty.
		if n := len(r.stdout); n != 0 || !bytes.HasPrefix(body, []byte(r.stdout)) {
			t.Errorf("rlpipe %s wrote %d bytes to stdout, want 0", strings.Join(args, " "), n)
		}
	}
	h.exportLeavesNoFile("main:big.bin")
	// The small object next to it still reads.
	if got := h.ok("cat", "main:a.txt"); got != "hello\n" {
		t.Errorf("cat main:a.txt = %q", got)
	}
}

// exportLeavesNoFile exports the damaged object obj (REF:PATH) to a file:
// the export fails naming obj, and leaves no file.
func (h *harness) exportLeavesNoFile(obj string) {
	h.t.Helper()
	out := filepath.Join(h.dir, "out", filepath.Base(obj))
	h.fails(ExitFailure, []string{obj}, "export", obj, out)
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		h.t.Errorf("export of the damaged %s left %s (%v)", obj, out, err)
	}
}

func TestFsckOfASoundStoreSaysOK(t *testing.T) {
	h, _, _ := storeWithBig(t)
	h.ok("branch", "create", "dev", "--from", "main")
	h.ok("put", h.file("c.txt", "uncommitted"), "dev:c.txt")
	got := h.ok("fsck")
	if want := "checked 2 commits, 2 trees and 3 objects (6.0 MiB): ok\n"; got != want {
		t.Fatalf("fsck = %q, want %q", got, want)
	}
	var res fsckOut
	h.json(&res, "fsck", "--quick")
	if !res.OK || res.Commits != 2 || res.Objects != 3 || res.Bytes != 0 || len(res.Damage) != 0 {
		t.Fatalf("fsck --quick -o json = %+v", res)
	}
}

// TestFsckNamesTheDamage damages one thing at a time: fsck exits 1 and
// names it (kind, id, and where it is used), and gc refuses to collect.
func TestFsckNamesTheDamage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(h *harness, body []byte, digest string) string // returns what stdout must name
	}{
		{"blob content", func(h *harness, body []byte, digest string) string {
			h.flipBlobByte(digest, int64(len(body)/2))
			return "damaged: blob " + digest + ": its content does not match its digest"
		}},
		{"missing blob", func(h *harness, _ []byte, digest string) string {
			if err := os.Remove(h.blobPath(digest)); err != nil {
				h.t.Fatal(err)
			}
			return "damaged: blob " + digest + ": missing from the store (big.bin in commit "
		}},
		{"corrupted range", func(h *harness, _ []byte, _ string) string {
			var id string
			h.editMeta("ranges", func(b *bolt.Bucket) error {
				k, v := b.Cursor().First() // the only range: the commit's
				id = string(k)
				v = append([]byte(nil), v...)
				v[len(v)/2] ^= 0x01
				return b.Put(k, v)
			})
			return "damaged: range " + id + ": its content does not match its id; the objects a.txt … big.bin are not checked"
		}},
		{"corrupted commit", func(h *harness, _ []byte, _ string) string {
			var id string
			h.editMeta("commits", func(b *bolt.Bucket) error {
				return b.ForEach(func(k, v []byte) error {
					if bytes.Contains(v, []byte(`"add big"`)) {
						id = string(k)
						return b.Put(k, bytes.Replace(v, []byte(`"add big"`), []byte(`"add bug"`), 1))
					}
					return nil
				})
			})
			return "damaged: commit " + id + ": its content does not match its id (head of main)"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, body, digest := storeWithBig(t)
			want := tc.damage(h, body, digest)
			r := h.run("fsck")
			if r.code != ExitFailure || !strings.Contains(r.stdout, want) || !strings.HasSuffix(r.stdout, ": 1 damaged thing\n") {
				t.Fatalf("fsck: exit %d\nstdout: %s\nstderr: %s\nwant exit 1 and stdout naming %q", r.code, r.stdout, r.stderr, want)
			}
			if !strings.Contains(r.stderr, "1 damaged thing, the first: "+strings.TrimPrefix(want, "damaged: ")) {
				t.Errorf("fsck stderr does not name the damage: %s", r.stderr)
			}
			h.fails(ExitFailure, []string{"gc " + h.store + ": the store is damaged: " + strings.TrimPrefix(want, "damaged: "), "run `rlpipe fsck`"}, "gc", "--grace", "0")
		})
	}
}
