package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestFsckAndCatOfADamagedObjectOnLakeFS writes a 6 MiB object through the
// lakeFS backend (so it carries a recorded SHA-256), then changes its
// bytes on the lakeFS side, keeping rlpipe's metadata, as a tool that
// rewrote it would: fsck lists it and exits 1, and says what it cannot
// check there; cat and export write nothing and name ref:path and what to
// do on lakeFS.
func TestFsckAndCatOfADamagedObjectOnLakeFS(t *testing.T) {
	ctx := context.Background()
	h := newStore(t)
	remote, backing, _ := servedWithMD5(t, h)
	body := bigBody()
	sum := sha256Hex(body)
	remote.ok("put", h.file("big.bin", string(body)), "main:big.bin")
	remote.ok("put", h.file("a.txt", "hello\n"), "main:a.txt")
	remote.ok("commit", "main", "-m", "add big")

	if got, want := remote.ok("fsck"), "not checked: "+lakefs.LimitTrees+"\nchecked 2 commits and 2 objects (6.0 MiB): ok\n"; got != want {
		t.Fatalf("fsck of a sound repository = %q, want %q", got, want)
	}

	damaged := bytes.Clone(body)
	damaged[len(damaged)/2] ^= 0x20
	meta := map[string]string{lakefs.MetaSHA256: sum}
	if _, err := backing.PutObject(ctx, "main", "big.bin", bytes.NewReader(damaged), &artifacts.PutOptions{Metadata: meta}); err != nil {
		t.Fatal(err)
	}
	c, err := backing.Commit(ctx, "main", "big.bin rewritten, its recorded SHA-256 kept", nil)
	if err != nil {
		t.Fatal(err)
	}

	damage := "blob " + sum + ": its content does not match the SHA-256 recorded under rlpipe-sha256 when it was written (it reads back as " +
		sha256Hex(damaged) + ") (big.bin in commit " + c.ID[:12] + ", reached from main)"
	r := remote.run("fsck")
	wantOut := "damaged: " + damage + "\nnot checked: " + lakefs.LimitTrees + "\nchecked 3 commits and 3 objects (12.0 MiB): 1 damaged thing\n"
	wantErr := "rlpipe: fsck " + remote.store + ": 1 damaged thing, the first: " + damage +
		" (write each damaged object again from a sound copy (`rlpipe put FILE BRANCH:PATH`, then commit), revert the commits that wrote them, " +
		"or delete the refs that reach them; a lakeFS that cannot serve an object is repaired with lakeFS's own tools)\n"
	if r.code != ExitFailure || r.stdout != wantOut || r.stderr != wantErr {
		t.Errorf("fsck: exit %d\nstdout %q\nwant   %q\nstderr %q\nwant   %q", r.code, r.stdout, wantOut, r.stderr, wantErr)
	}
	var res fsckOut
	r = remote.run("fsck", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != ExitFailure || res.OK || len(res.Damage) != 1 || res.Damage[0].String() != damage ||
		res.Unchecked != 0 || len(res.Limits) != 1 || res.Limits[0] != lakefs.LimitTrees {
		t.Errorf("fsck -o json: exit %d, %v, %s", r.code, err, r.stdout)
	}
	res = fsckOut{}
	remote.json(&res, "fsck", "--quick")
	if !res.OK || res.Commits != 3 || res.Objects != 3 || res.Bytes != 0 || len(res.Limits) != 2 || res.Limits[1] != lakefs.LimitQuick {
		t.Errorf("fsck --quick -o json (sizes only: the damaged object has its recorded size) = %+v", res)
	}

	readErr := "integrity check failed: read main:big.bin: its bytes have SHA-256 " + sha256Hex(damaged) + ", not the " + sum +
		" recorded under rlpipe-sha256 when it was written (changed by a tool that kept rlpipe's metadata, or the body changed while it was uploaded): " +
		"write it again from a sound copy (`rlpipe put FILE BRANCH:big.bin`, then commit) or revert the commit that wrote it; " +
		"`rlpipe fsck` lists every damaged object the refs of this lakeFS repository reach\n"
	for _, tc := range []struct {
		name string
		args []string
		verb string
	}{
		{"cat", []string{"cat", "main:big.bin"}, "cat"},
		{"cat --raw", []string{"cat", "main:big.bin", "--raw"}, "cat"},
		{"export to stdout", []string{"export", "main:big.bin", "-"}, "read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := remote.run(tc.args...)
			want := "rlpipe: " + tc.verb + " main:big.bin: " + readErr
			if r.code != ExitFailure || r.stdout != "" || r.stderr != want {
				t.Errorf("exit %d, %d bytes on stdout, stderr\n%q\nwant exit 1, 0 bytes,\n%q", r.code, len(r.stdout), r.stderr, want)
			}
		})
	}
	remote.exportLeavesNoFile("main:big.bin")
	if got := remote.ok("cat", "main:a.txt"); got != "hello\n" {
		t.Errorf("cat main:a.txt = %q", got)
	}
}

// TestCatOfALargeObjectChecksItInATemporaryFile: an object past the
// 32 MiB held in memory is checked in a temporary file before its first
// byte is printed; the file is gone afterwards, whether the object is
// sound or damaged.
func TestCatOfALargeObjectChecksItInATemporaryFile(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	h := newStore(t)
	body := bytes.Repeat([]byte("0123456789abcdef"), (inMemoryLimit+4096)/16)
	digest := sha256Hex(body)
	h.ok("put", h.file("huge.bin", string(body)), "main:huge.bin")
	h.ok("commit", "main", "-m", "a large object")

	for _, damage := range []bool{false, true} {
		if damage {
			h.flipBlobByte(digest, int64(len(body)-1))
		}
		r := h.run("cat", "main:huge.bin")
		switch {
		case !damage && (r.code != ExitOK || r.stdout != string(body)):
			t.Errorf("cat of a sound object: exit %d, %d bytes (want %d): %s", r.code, len(r.stdout), len(body), r.stderr)
		case damage && (r.code != ExitFailure || r.stdout != "" || !strings.HasPrefix(r.stderr, "rlpipe: cat main:huge.bin: integrity check failed: main:huge.bin: blob "+digest)):
			t.Errorf("cat of a damaged object: exit %d, %d bytes on stdout, stderr %q", r.code, len(r.stdout), r.stderr)
		}
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Errorf("damaged %v: cat left %d files in TMPDIR, the first %s", damage, len(left), left[0].Name())
		}
	}
}
