package artifactstest

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"testing/iotest"

	"github.com/rlpipe/rlpipe/artifacts"
)

var objectScenarios = []scenario{
	{"RoundTrip", testObjectRoundTrip},
	{"Checksums", testObjectChecksums},
	{"PathCharacters", testObjectPathCharacters},
	{"Overwrite", testObjectOverwrite},
	{"IfAbsent", testObjectIfAbsent},
	{"Missing", testObjectMissing},
	{"Delete", testObjectDelete},
	{"WriteToNonBranch", testObjectWriteToNonBranch},
	{"InvalidPath", testObjectInvalidPath},
	{"Large", testObjectLarge},
	{"Sizes", testObjectSizes},
	{"ReaderOutlivesOverwrite", testObjectReaderOutlivesOverwrite},
	{"Range", testObjectRange},
	{"Copy", testObjectCopy},
	{"CopyMany", testObjectCopyMany},
	{"PutMany", testObjectPutMany},
}

func testObjectRoundTrip(f *fixture) {
	t := f.t
	const path = "data/prompts.jsonl"
	content := []byte("{\"prompt\":\"2+2\"}\n{\"prompt\":\"3*3\"}\n")
	meta := map[string]string{"rlpipe-task": "prompts", "rlpipe-seed": "7", "owner": "rl-team"}
	put := f.putWith("main", path, content, &artifacts.PutOptions{ContentType: "application/x-ndjson", Metadata: meta})
	wantEqual(t, "put: path", put.Path, path)
	wantEqual(t, "put: size", put.Size, int64(len(content)))
	if put.Checksum == "" {
		t.Fatalf("put: empty checksum")
	}

	got, info, err := readObject(f.ctx, f.st, "main", path)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if !bytes.Equal(got, content) {
		t.Fatalf("get: got %q, want %q", got, content)
	}
	wantEqual(t, "get: path", info.Path, path)
	wantEqual(t, "get: size", info.Size, int64(len(content)))
	wantEqual(t, "get: checksum", info.Checksum, put.Checksum)

	st := f.stat("main", path)
	wantEqual(t, "stat: path", st.Path, path)
	wantEqual(t, "stat: size", st.Size, int64(len(content)))
	wantEqual(t, "stat: checksum", st.Checksum, put.Checksum)
	wantEqual(t, "stat: content type", st.ContentType, "application/x-ndjson")
	wantMap(t, "stat: metadata", st.Metadata, meta)
	if st.Mtime.IsZero() {
		t.Fatalf("stat: zero mtime")
	}

	// The same object, committed, reads back identically.
	f.commit("main", "add prompts")
	st = f.stat("main@", path)
	wantEqual(t, "stat after commit: size", st.Size, int64(len(content)))
	wantEqual(t, "stat after commit: checksum", st.Checksum, put.Checksum)
	wantEqual(t, "stat after commit: content type", st.ContentType, "application/x-ndjson")
	wantMap(t, "stat after commit: metadata", st.Metadata, meta)
	if got := f.readBytes("main@", path); !bytes.Equal(got, content) {
		t.Fatalf("get after commit: got %q, want %q", got, content)
	}

	// An empty object is an object.
	f.put("main", "empty", "")
	wantEqual(t, "stat empty: size", f.stat("main", "empty").Size, int64(0))
	f.wantContent("main", "empty", "")
}

func testObjectChecksums(f *fixture) {
	t := f.t
	a := f.put("main", "a.txt", "same bytes")
	b := f.put("main", "dir/b.txt", "same bytes")
	c := f.put("main", "c.txt", "other bytes")
	wantEqual(t, "checksum of identical content", b.Checksum, a.Checksum)
	if c.Checksum == a.Checksum {
		t.Fatalf("checksum of different content: both %q", a.Checksum)
	}
	wantEqual(t, "stat checksum matches put", f.stat("main", "dir/b.txt").Checksum, a.Checksum)
	f.commit("main", "checksums")
	wantEqual(t, "committed checksum matches put", f.stat("main@", "c.txt").Checksum, c.Checksum)
}

// testObjectPathCharacters uses paths that need escaping in a URL or a
// query string; lakeFS treats paths as opaque keys.
func testObjectPathCharacters(f *fixture) {
	t := f.t
	paths := []string{
		"a b/c d.txt",
		"plus+sign",
		"pct%20encoded",
		"query?x=1&y=2",
		"hash#fragment",
		"semi;colon,comma",
		"quote'double\"",
		"tilde~caret^at@dollar$colon:",
		"ünïcødé/日本語.txt",
		"trailing-space ",
		"deep/er/and/deeper/file",
	}
	for _, p := range paths {
		f.put("main", p, "content of "+p)
	}
	check := func(ref string) {
		t.Helper()
		for _, p := range paths {
			f.wantContent(ref, p, "content of "+p)
			wantEqual(t, "stat "+quote(p)+": path", f.stat(ref, p).Path, p)
		}
		want := slices.Sorted(slices.Values(paths))
		wantSlice(t, "list "+ref, f.listPaths(ref, nil), want)
		wantSlice(t, "list "+ref+" under a prefix with a space", f.listPaths(ref, &artifacts.ListOptions{Prefix: "a b/"}), []string{"a b/c d.txt"})
		wantSlice(t, "list "+ref+" under a unicode prefix", f.listPaths(ref, &artifacts.ListOptions{Prefix: "ünïcødé/"}), []string{"ünïcødé/日本語.txt"})
		wantSlice(t, "list "+ref+" after a path with '?'", f.listPaths(ref, &artifacts.ListOptions{After: "query?x=1&y=2", Limit: 1}), want[slices.Index(want, "query?x=1&y=2")+1:][:1])
	}
	check("main")
	f.commit("main", "odd paths")
	check("main@")
	f.del("main", "query?x=1&y=2")
	f.wantMissing("main", "query?x=1&y=2")
	f.wantMissing("main", "query?x=1&y=2x")
	f.wantMissing("main", "query")
	f.wantChanges("diff uncommitted after deleting an odd path", f.st.DiffUncommitted(f.ctx, "main"), "removed query?x=1&y=2")
}

func testObjectOverwrite(f *fixture) {
	t := f.t
	v1 := f.put("main", "model/config.json", `{"lr":0.1}`)
	v2 := f.put("main", "model/config.json", `{"lr":0.001,"warmup":10}`)
	f.wantContent("main", "model/config.json", `{"lr":0.001,"warmup":10}`)
	st := f.stat("main", "model/config.json")
	wantEqual(t, "stat after overwrite: size", st.Size, int64(len(`{"lr":0.001,"warmup":10}`)))
	wantEqual(t, "stat after overwrite: checksum", st.Checksum, v2.Checksum)
	if v1.Checksum == v2.Checksum {
		t.Fatalf("overwrite: checksum did not change (%q)", v1.Checksum)
	}

	// An overwrite replaces metadata and content type too.
	f.putWith("main", "tagged.json", []byte("{}"), &artifacts.PutOptions{
		ContentType: "application/json", Metadata: map[string]string{"rlpipe-task": "t1"},
	})
	f.putWith("main", "tagged.json", []byte("[]"), &artifacts.PutOptions{Metadata: map[string]string{"owner": "x"}})
	wantMap(t, "metadata after overwrite", f.stat("main", "tagged.json").Metadata, map[string]string{"owner": "x"})
	f.del("main", "tagged.json")

	// Overwriting a committed object stages the new version only.
	f.commit("main", "config v2")
	f.put("main", "model/config.json", "v3")
	f.wantContent("main", "model/config.json", "v3")
	f.wantContent("main@", "model/config.json", `{"lr":0.001,"warmup":10}`)
	wantSlice(t, "list after overwrite", f.listPaths("main", nil), []string{"model/config.json"})
}

func testObjectIfAbsent(f *fixture) {
	t := f.t
	absent := &artifacts.PutOptions{IfAbsent: true}
	f.putWith("main", "once.txt", []byte("first"), absent)
	f.wantContent("main", "once.txt", "first")

	// Staged object.
	_, err := f.st.PutObject(f.ctx, "main", "once.txt", bytes.NewReader([]byte("second")), absent)
	wantErr(t, "put if absent over a staged object", err, artifacts.ErrObjectExists)
	f.wantContent("main", "once.txt", "first")

	// Committed object.
	f.commit("main", "once")
	_, err = f.st.PutObject(f.ctx, "main", "once.txt", bytes.NewReader([]byte("third")), absent)
	wantErr(t, "put if absent over a committed object", err, artifacts.ErrObjectExists)
	f.wantContent("main", "once.txt", "first")
	f.wantChanges("diff uncommitted after refused put", f.st.DiffUncommitted(f.ctx, "main"))

	// Without IfAbsent the same put overwrites.
	f.put("main", "once.txt", "fourth")
	f.wantContent("main", "once.txt", "fourth")
}

func testObjectMissing(f *fixture) {
	f.wantMissing("main", "no/such/object")
	f.put("main", "dir/present", "x")
	f.wantMissing("main", "dir/pres")
	f.wantMissing("main", "dir")
	f.commit("main", "present")
	f.wantMissing("main@", "dir/absent")
	f.wantMissing(f.base.ID, "dir/present")
}

func testObjectDelete(f *fixture) {
	t := f.t
	// A staged object that is deleted is gone.
	f.put("main", "tmp/staged", "s")
	f.del("main", "tmp/staged")
	f.wantMissing("main", "tmp/staged")

	// A committed object that is deleted is gone from the branch but
	// still in its last commit until the deletion is committed.
	f.putCommit("main", "kept/committed", "c")
	f.del("main", "kept/committed")
	f.wantMissing("main", "kept/committed")
	f.wantContent("main@", "kept/committed", "c")
	wantSlice(t, "list after delete", f.listPaths("main", nil), []string{})
	c := f.commit("main", "delete committed")
	f.wantMissing("main@", "kept/committed")
	if len(c.Parents) != 1 {
		t.Fatalf("commit deletion: got parents %v, want one", c.Parents)
	}
	f.wantContent(c.Parents[0], "kept/committed", "c")
}

func testObjectWriteToNonBranch(f *fixture) {
	t := f.t
	c := f.putCommit("main", "x", "1")
	if _, err := f.st.CreateTag(f.ctx, "v1", "main"); err != nil {
		t.Fatalf("create tag: %v", err)
	}
	for _, ref := range []string{"v1", c.ID, "no-such-branch"} {
		_, err := f.st.PutObject(f.ctx, ref, "y", bytes.NewReader([]byte("2")), nil)
		wantErr(t, "put to "+ref, err, artifacts.ErrInvalid, artifacts.ErrNotFound)
		err = f.st.DeleteObject(f.ctx, ref, "x")
		wantErr(t, "delete on "+ref, err, artifacts.ErrInvalid, artifacts.ErrNotFound)
	}
	f.wantMissing("main", "y")
	f.wantContent("v1", "x", "1")
	f.wantContent(c.ID, "x", "1")
}

func testObjectInvalidPath(f *fixture) {
	t := f.t
	_, err := f.st.PutObject(f.ctx, "main", "", bytes.NewReader([]byte("x")), nil)
	wantErr(t, "put empty path", err, artifacts.ErrInvalid)
	_, _, err = readObject(f.ctx, f.st, "main", "")
	wantErr(t, "get empty path", err, artifacts.ErrInvalid, artifacts.ErrNotFound)
	_, err = f.st.StatObject(f.ctx, "main", "")
	wantErr(t, "stat empty path", err, artifacts.ErrInvalid, artifacts.ErrNotFound)
	err = f.st.DeleteObject(f.ctx, "main", "")
	wantErr(t, "delete empty path", err, artifacts.ErrInvalid, artifacts.ErrNotFound)
	wantSlice(t, "list after invalid puts", f.listPaths("main", nil), []string{})
}

// largeSize is past the 5 MiB part size of multipart uploads on S3-backed
// lakeFS, so that an upload split into parts is checked too.
const largeSize = 5<<20 + 12345

func testObjectLarge(f *fixture) {
	t := f.t
	content := randomBytes(1, largeSize)
	// Hide the concrete reader type so that the store cannot learn the
	// size in advance: it must stream.
	r := struct{ io.Reader }{bytes.NewReader(content)}
	info, err := f.st.PutObject(f.ctx, "main", "big/blob.bin", r, nil)
	if err != nil {
		t.Fatalf("put large: %v", err)
	}
	wantEqual(t, "put large: size", info.Size, int64(largeSize))
	if got := f.readBytes("main", "big/blob.bin"); !bytes.Equal(got, content) {
		t.Fatalf("get large: %d bytes differ from the %d written", len(got), len(content))
	}
	f.commit("main", "large")
	if got := f.readBytes("main@", "big/blob.bin"); !bytes.Equal(got, content) {
		t.Fatalf("get large after commit: %d bytes differ from the %d written", len(got), len(content))
	}
	wantEqual(t, "stat large: size", f.stat("main@", "big/blob.bin").Size, int64(largeSize))
}

func testObjectRange(f *fixture) {
	t := f.t
	rr := ability[artifacts.RangeReader](f)
	content := randomBytes(2, 1000)
	f.putWith("main", "table.parquet", content, nil)
	check := func(ref string) {
		t.Helper()
		cases := []struct {
			name           string
			offset, length int64
			want           []byte
		}{
			{"start", 0, 10, content[:10]},
			{"middle", 400, 123, content[400:523]},
			{"end", 990, 10, content[990:]},
			{"tail", 992, -1, content[992:]},
			{"whole", 0, -1, content},
			{"from middle to end", 500, -1, content[500:]},
		}
		for _, c := range cases {
			rc, err := rr.GetObjectRange(f.ctx, ref, "table.parquet", c.offset, c.length)
			if err != nil {
				t.Fatalf("range %s on %s: %v", c.name, ref, err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatalf("range %s on %s: read: %v", c.name, ref, err)
			}
			if !bytes.Equal(got, c.want) {
				t.Fatalf("range %s on %s (offset %d, length %d): got %d bytes %x…, want %d bytes %x…",
					c.name, ref, c.offset, c.length, len(got), head(got), len(c.want), head(c.want))
			}
		}
	}
	check("main")
	f.commit("main", "table")
	check("main@")

	_, err := rr.GetObjectRange(f.ctx, "main", "no-such.parquet", 0, 10)
	wantErr(t, "range of a missing object", err, artifacts.ErrObjectNotFound)
}

// testObjectSizes round-trips sizes around the boundaries backends
// commonly have (buffers, verify-before-serving limits), reading them
// back with reads of many sizes.
func testObjectSizes(f *fixture) {
	t := f.t
	sizes := []int{1, 4095, 4096, 4097, 64<<10 + 1, 4<<20 - 1, 4 << 20, 4<<20 + 1}
	for i, n := range sizes {
		content := randomBytes(uint64(10+i), n)
		p := "sizes/" + itoa(n)
		f.putWith("main", p, content, nil)
		rc, info, err := f.st.GetObject(f.ctx, "main", p)
		if err != nil {
			t.Fatalf("get %s: %v", p, err)
		}
		wantEqual(t, "get "+p+": size", info.Size, int64(n))
		if err := iotest.TestReader(rc, content); err != nil {
			rc.Close()
			t.Fatalf("read %s: %v", p, err)
		}
		if err := rc.Close(); err != nil {
			t.Fatalf("close %s: %v", p, err)
		}
	}
}

// testObjectReaderOutlivesOverwrite keeps a reader open while the object
// is overwritten, committed and deleted: objects are immutable, so the
// reader still returns the bytes it was opened on.
func testObjectReaderOutlivesOverwrite(f *fixture) {
	t := f.t
	old := randomBytes(3, 1<<20)
	f.putWith("main", "model.bin", old, nil)
	f.commit("main", "v1")
	rc, _, err := f.st.GetObject(f.ctx, "main", "model.bin")
	if err != nil {
		t.Fatalf("open model.bin: %v", err)
	}
	defer rc.Close()
	head := make([]byte, 100)
	if _, err := io.ReadFull(rc, head); err != nil {
		t.Fatalf("read the start of model.bin: %v", err)
	}
	f.put("main", "model.bin", "v2")
	f.commit("main", "v2")
	f.del("main", "model.bin")
	f.commit("main", "gone")
	rest, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read the rest of model.bin: %v", err)
	}
	if got := append(head, rest...); !bytes.Equal(got, old) {
		t.Fatalf("reader opened before the overwrite: got %d bytes that differ from the %d first written", len(got), len(old))
	}
	f.wantMissing("main", "model.bin")
	f.wantContent("main~1", "model.bin", "v2")
}

// randomBytes returns n bytes from a fixed seed.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0x72_6c_70_69_70_65))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func head(b []byte) []byte { return b[:min(len(b), 8)] }

func testObjectCopy(f *fixture) {
	t := f.t
	cp := ability[artifacts.Copier](f)
	src := f.putWith("main", "cache/out.parquet", []byte("output bytes"), &artifacts.PutOptions{Metadata: map[string]string{"rlpipe-task": "gen"}})
	c := f.commit("main", "cache entry")
	f.branch("run", "main")
	// From a commit to another branch, and from a staged object.
	got, err := cp.CopyObject(f.ctx, c.ID, "cache/out.parquet", "run", "copies/out.parquet")
	if err != nil {
		t.Fatalf("copy from commit: %v", err)
	}
	if got.Path != "copies/out.parquet" || got.Size != src.Size || got.Checksum != src.Checksum {
		t.Fatalf("copy info = %+v, want path copies/out.parquet, size %d, checksum %s", got, src.Size, src.Checksum)
	}
	f.wantContent("run", "copies/out.parquet", "output bytes")
	if md := f.stat("run", "copies/out.parquet").Metadata; md["rlpipe-task"] != "gen" {
		t.Fatalf("copied metadata = %v, want rlpipe-task=gen", md)
	}
	f.put("run", "staged.txt", "staged")
	if _, err := cp.CopyObject(f.ctx, "run", "staged.txt", "run", "staged-copy.txt"); err != nil {
		t.Fatalf("copy a staged object: %v", err)
	}
	f.wantContent("run", "staged-copy.txt", "staged")
	f.wantMissing("main", "copies/out.parquet")
	if _, err := cp.CopyObject(f.ctx, "main", "nope", "run", "x"); !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("copy a missing object: got %v, want ErrNotFound", err)
	}
}

// testObjectCopyMany links several objects of a commit into a branch in
// one step (artifacts.MultiCopier), a large one among them, and checks
// that a path missing at the source stages none of them.
func testObjectCopyMany(f *fixture) {
	t := f.t
	mc := ability[artifacts.MultiCopier](f)
	large := randomBytes(9, 3<<20)
	f.branch("work", "main")
	f.branch("run", "main")
	f.branch("empty-run", "main")
	a := f.putWith("work", "it/a.parquet", []byte("a bytes"), nil)
	b := f.putWith("work", "it/adapter/b.bin", large, nil)
	c := f.commit("work", "outputs")
	got, err := mc.CopyObjects(f.ctx, c.ID, "run", []string{"it/a.parquet", "it/adapter/b.bin"})
	if err != nil {
		t.Fatalf("copy two objects: %v", err)
	}
	if len(got) != 2 || got[0].Path != "it/a.parquet" || got[0].Checksum != a.Checksum || got[1].Path != "it/adapter/b.bin" || got[1].Checksum != b.Checksum {
		t.Fatalf("copy infos = %+v, want it/a.parquet %s then it/adapter/b.bin %s", got, a.Checksum, b.Checksum)
	}
	f.wantContent("run", "it/a.parquet", "a bytes")
	f.wantContent("run", "it/adapter/b.bin", string(large))

	_, err = mc.CopyObjects(f.ctx, c.ID, "empty-run", []string{"it/a.parquet", "it/nope.parquet"})
	want := "copy 2 objects of " + c.ID + " to empty-run: it/nope.parquet: " + c.ID + ":it/nope.parquet: object not found"
	if err == nil || err.Error() != want || !errors.Is(err, artifacts.ErrObjectNotFound) {
		t.Fatalf("copy with a missing object: got %v, want %q (ErrObjectNotFound)", err, want)
	}
	f.wantMissing("empty-run", "it/a.parquet")
}

// testObjectPutMany stages a small and a large object in one step
// (artifacts.MultiPutter), with their metadata, and checks that a put
// refused (IfAbsent on a path the branch holds) stages none of them.
func testObjectPutMany(f *fixture) {
	t := f.t
	mp := ability[artifacts.MultiPutter](f)
	large := randomBytes(11, 3<<20)
	meta := &artifacts.PutOptions{Metadata: map[string]string{"rlpipe-task": "train"}}
	got, err := mp.PutObjects(f.ctx, "main", []artifacts.Put{
		{Path: "it/metrics.json", Body: bytes.NewReader([]byte(`{"loss":1}`)), Options: meta},
		{Path: "it/adapter/weights.bin", Body: bytes.NewReader(large), Options: meta},
	})
	if err != nil {
		t.Fatalf("put two objects: %v", err)
	}
	if len(got) != 2 || got[0].Path != "it/metrics.json" || got[0].Size != 10 || got[1].Path != "it/adapter/weights.bin" || got[1].Size != int64(len(large)) {
		t.Fatalf("put infos = %+v, want it/metrics.json of 10 bytes then it/adapter/weights.bin of %d", got, len(large))
	}
	f.wantContent("main", "it/metrics.json", `{"loss":1}`)
	f.wantContent("main", "it/adapter/weights.bin", string(large))
	if md := f.stat("main", "it/adapter/weights.bin").Metadata; md["rlpipe-task"] != "train" {
		t.Fatalf("metadata = %v, want rlpipe-task=train", md)
	}

	_, err = mp.PutObjects(f.ctx, "main", []artifacts.Put{
		{Path: "it/new.json", Body: bytes.NewReader([]byte("new"))},
		{Path: "it/metrics.json", Body: bytes.NewReader([]byte("again")), Options: &artifacts.PutOptions{IfAbsent: true}},
	})
	want := "put 2 objects on main: it/metrics.json: object exists: main:it/metrics.json"
	if err == nil || err.Error() != want || !errors.Is(err, artifacts.ErrObjectExists) {
		t.Fatalf("put with a refused object: got %v, want %q (ErrObjectExists)", err, want)
	}
	f.wantMissing("main", "it/new.json")
	f.wantContent("main", "it/metrics.json", `{"loss":1}`)
}
