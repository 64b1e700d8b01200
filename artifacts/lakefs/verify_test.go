package lakefs_test

import (
	"bytes"
	"context"
	"io"
	"reflect"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
	"github.com/rlpipe/rlpipe/artifacts/local"
)

// plantMismatch stages, straight into the store a lakeFS stand-in
// serves, an object whose bytes are not the ones the SHA-256 recorded with
// it names: what a tool that rewrote the object but kept rlpipe's
// metadata leaves.
func plantMismatch(t *testing.T, backing *local.Store, branch, path string, recorded, stored []byte) {
	t.Helper()
	meta := map[string]string{lakefs.MetaSHA256: artifactstest.SHA256Hex(recorded)}
	if _, err := backing.PutObject(context.Background(), branch, path, bytes.NewReader(stored), &artifacts.PutOptions{Metadata: meta}); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyThroughTheAPI checks what Verify finds on a lakeFS (the
// stand-in, reporting MD5 checksums as lakeFS's local block store does):
// committed and staged objects whose bytes do not match their recorded
// SHA-256, and an object lakeFS cannot serve, each named once with the
// first ref that reaches it; an object without a recorded SHA-256 is
// read but counted as unchecked; and the limits are stated.
func TestVerifyThroughTheAPI(t *testing.T) {
	ctx := context.Background()
	backing, st, _ := md5LakeFS(t)
	good := []byte("rollouts of iteration 1\n")
	big := bytes.Repeat([]byte("0123456789abcdef"), 1024) // 16 KiB: a blob file of its own
	if _, err := st.PutObject(ctx, "main", "good.txt", bytes.NewReader(good), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutObject(ctx, "main", "big.bin", bytes.NewReader(big), nil); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeAll(pw, []byte("piped\n"))) }()
	if _, err := st.PutObject(ctx, "main", "piped.txt", pr, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Commit(ctx, "main", "three objects", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateTag(ctx, "v1", "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateBranch(ctx, "dev", "main"); err != nil {
		t.Fatal(err)
	}
	plantMismatch(t, backing, "dev", "iterations/000001/x.parquet", []byte("version 1"), []byte("version 2"))
	second, err := st.Commit(ctx, "dev", "a damaged object", nil)
	if err != nil {
		t.Fatal(err)
	}
	plantMismatch(t, backing, "main", "staged.bin", []byte("as written"), []byte("as stored"))

	sound, err := st.Verify(ctx, &artifacts.VerifyOptions{Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	// --quick sees sizes only: the two mismatches hold bytes of the
	// recorded size.
	wantQuick := artifacts.VerifyResult{Commits: 3, Objects: 5, Limits: []string{lakefs.LimitTrees, lakefs.LimitQuick}}
	if !reflect.DeepEqual(sound, wantQuick) {
		t.Errorf("quick: %+v\nwant %+v", sound, wantQuick)
	}

	bigSum := artifactstest.SHA256Hex(big)
	flipped := artifactstest.CorruptBlob(t, backing, bigSum)
	res, err := st.Verify(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := artifacts.VerifyResult{
		// The object lakeFS does not serve adds no bytes.
		Commits: 3, Objects: 5, Bytes: int64(len(good) + len("piped\n") + len("version 2") + len("as stored")),
		Damage: []artifacts.Damage{
			// The stand-in's embedded store refuses the corrupted blob; its
			// message is the server's.
			{Kind: artifacts.DamageBlob, ID: bigSum, Ref: "dev", Commit: second.ID, Path: "big.bin", Uses: 2,
				Problem: "lakeFS does not serve it: server answered 500: integrity check failed: " + second.ID + ":big.bin: blob " + bigSum +
					" read back as 16384 bytes with digest " + flipped + " (corrupted on disk: run `rlpipe fsck` to list the damage; restore the blob from a copy, or delete the object and write it again)"},
			{Kind: artifacts.DamageBlob, ID: artifactstest.SHA256Hex([]byte("version 1")), Ref: "dev", Commit: second.ID, Path: "iterations/000001/x.parquet", Uses: 1,
				Problem: "its content does not match the SHA-256 recorded under rlpipe-sha256 when it was written (it reads back as " + artifactstest.SHA256Hex([]byte("version 2")) + ")"},
			{Kind: artifacts.DamageBlob, ID: artifactstest.SHA256Hex([]byte("as written")), Ref: "main", Path: "staged.bin", Uses: 1,
				Problem: "its content does not match the SHA-256 recorded under rlpipe-sha256 when it was written (it reads back as " + artifactstest.SHA256Hex([]byte("as stored")) + ")"},
		},
		Unchecked: 1,
		Limits: []string{lakefs.LimitTrees, "contents: 1 of 5 objects carry no SHA-256 recorded by rlpipe (written by another client, or from a body read once): " +
			"each was read whole, but lakeFS's own checksum is its block store's ETag, which the API gives no way to recompute, so their bytes are not compared"},
	}
	if !reflect.DeepEqual(res, want) {
		t.Errorf("full check:\n%+v\nwant\n%+v", res, want)
	}
}
