package artifactstest

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// Fixtures for the tests of packages that use a store: each takes t, does
// one thing with a real store and fails the test at once when it cannot,
// naming the ref and path.

// NewLocal returns a fresh embedded store in the directory "store" below
// t.TempDir(), whose default branch "main" holds one initial commit. It
// closes when the test ends.
func NewLocal(t testing.TB) *local.Store {
	t.Helper()
	return NewLocalNamed(t, "store")
}

// NewLocalNamed is NewLocal in the directory name below t.TempDir(): an
// embedded store is named after its directory, so this is how a test
// picks the repository name a store server serves it under.
func NewLocalNamed(t testing.TB, name string) *local.Store {
	t.Helper()
	st, err := local.Create(context.Background(), filepath.Join(t.TempDir(), name), "main", nil)
	if err != nil {
		t.Fatalf("create a store named %s: %v", name, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Put stages b at branch:path.
func Put(t testing.TB, st artifacts.Store, branch, path string, b []byte) {
	t.Helper()
	if _, err := st.PutObject(context.Background(), branch, path, bytes.NewReader(b), nil); err != nil {
		t.Fatalf("put %s:%s: %v", branch, path, err)
	}
}

// PutTable writes rows as the table tb in Parquet and stages the file at
// branch:path.
func PutTable[T any](t testing.TB, st artifacts.Store, branch, path string, tb *tables.Table[T], rows []T) {
	t.Helper()
	buf := new(bytes.Buffer)
	err := tables.Write(buf, tb, rows, nil)
	if err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	Put(t, st, branch, path, buf.Bytes())
}

// Read reads the whole object at ref:path; a missing object fails the
// test.
func Read(t testing.TB, st artifacts.Store, ref, path string) []byte {
	t.Helper()
	b, err := artifacts.ReadObject(context.Background(), st, ref, path)
	if err == nil && b == nil {
		err = artifacts.ErrNotFound
	}
	if err != nil {
		t.Fatalf("read %s:%s: %v", ref, path, err)
	}
	return b
}

// ReadInfo reads the whole object at ref:path and returns it with the
// ObjectInfo GetObject gave; an error fails the test.
func ReadInfo(t testing.TB, st artifacts.Store, ref, path string) ([]byte, artifacts.ObjectInfo) {
	t.Helper()
	b, info, err := readObject(context.Background(), st, ref, path)
	if err != nil {
		t.Fatalf("read %s:%s: %v", ref, path, err)
	}
	return b, info
}

// ReadTable reads every row of the table tb from the Parquet object at
// ref:path.
func ReadTable[T any](t testing.TB, st artifacts.Store, ref, path string, tb *tables.Table[T]) []T {
	t.Helper()
	b := Read(t, st, ref, path)
	rows, err := tables.Read(bytes.NewReader(b), int64(len(b)), path, tb)
	if err != nil {
		t.Fatalf("read %s:%s: %v", ref, path, err)
	}
	return rows
}

// SHA256Hex is the SHA-256 of b in lower-case hex: the checksum the
// embedded store reports for an object holding b.
func SHA256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// MD5Hex is the MD5 of b in lower-case hex: the checksum a lakeFS on a
// local block store reports for an object holding b.
func MD5Hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

// Sums maps the path of every object at ref that starts with one of
// prefixes (every object when there are none) to its checksum: what two
// runs that must have written the same bytes are compared by.
func Sums(t testing.TB, st artifacts.Store, ref string, prefixes ...string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for e, err := range st.ListObjects(context.Background(), ref, nil) {
		if err != nil {
			t.Fatalf("list %s: %v", ref, err)
		}
		if len(prefixes) == 0 || slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(e.Path, p) }) {
			m[e.Path] = e.Checksum
		}
	}
	return m
}

// Open opens the store at uri with artifacts.Open (a directory is an
// embedded store) and closes it when the test ends.
func Open(t testing.TB, uri string) artifacts.Store {
	t.Helper()
	st, err := artifacts.Open(context.Background(), uri, nil)
	if err != nil {
		t.Fatalf("open the store %s: %v", uri, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Stat returns what st says of the object at ref:path; a missing object
// or an error fails the test.
func Stat(t testing.TB, st artifacts.Store, ref, path string) artifacts.ObjectInfo {
	t.Helper()
	info, err := st.StatObject(context.Background(), ref, path)
	if err != nil {
		t.Fatalf("stat %s:%s: %v", ref, path, err)
	}
	return info
}
