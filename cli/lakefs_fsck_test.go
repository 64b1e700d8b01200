package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestFsckOfADamagedObjectOnLakeFS writes a 6 MiB object through the
// lakeFS backend (so it carries a recorded SHA-256), then changes its
// bytes on the lakeFS side, keeping rlpipe's metadata, as a tool that
// rewrote it would: fsck lists it and exits 1, and says what it cannot
// check there.
func TestFsckOfADamagedObjectOnLakeFS(t *testing.T) {
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
}
