package artifactstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
)

// fixture is one fresh repository plus the test using it. Its helpers fail
// the test at once, naming the step that went wrong, so that a test body
// reads as the sequence of operations it checks.
type fixture struct {
	t    *testing.T
	ctx  context.Context
	st   artifacts.Store
	repo artifacts.Repository
	// base is the default branch's head when the store was handed over:
	// the repository's initial commit.
	base artifacts.Commit
}

func newFixture(t *testing.T, newStore func(t *testing.T) artifacts.Store) *fixture {
	t.Helper()
	st := newStore(t)
	if st == nil {
		t.Fatalf("newStore returned a nil store")
	}
	f := &fixture{t: t, ctx: t.Context(), st: st}
	repo, err := st.Repository(f.ctx)
	if err != nil {
		t.Fatalf("repository: %v", err)
	}
	f.repo = repo
	f.base = f.resolve(repo.DefaultBranch)
	return f
}

// main is the default branch's name.
func (f *fixture) main() string { return f.repo.DefaultBranch }

func (f *fixture) put(branch, path, content string) artifacts.ObjectInfo {
	f.t.Helper()
	return f.putWith(branch, path, []byte(content), nil)
}

func (f *fixture) putWith(branch, path string, content []byte, opts *artifacts.PutOptions) artifacts.ObjectInfo {
	f.t.Helper()
	info, err := f.st.PutObject(f.ctx, branch, path, bytes.NewReader(content), opts)
	if err != nil {
		f.t.Fatalf("put %s:%s: %v", branch, path, err)
	}
	return info
}

func (f *fixture) read(ref, path string) string {
	f.t.Helper()
	return string(f.readBytes(ref, path))
}

func (f *fixture) readBytes(ref, path string) []byte {
	f.t.Helper()
	b, _, err := readObject(f.ctx, f.st, ref, path)
	if err != nil {
		f.t.Fatalf("read %s:%s: %v", ref, path, err)
	}
	return b
}

// wantContent checks that ref:path holds exactly want.
func (f *fixture) wantContent(ref, path, want string) {
	f.t.Helper()
	if got := f.read(ref, path); got != want {
		f.t.Fatalf("read %s:%s: got %q, want %q", ref, path, got, want)
	}
}

// wantMissing checks that reading and stating ref:path both report
// ErrObjectNotFound.
func (f *fixture) wantMissing(ref, path string) {
	f.t.Helper()
	_, _, err := readObject(f.ctx, f.st, ref, path)
	wantErr(f.t, "read "+ref+":"+path, err, artifacts.ErrObjectNotFound)
	_, err = f.st.StatObject(f.ctx, ref, path)
	wantErr(f.t, "stat "+ref+":"+path, err, artifacts.ErrObjectNotFound)
}

func (f *fixture) del(branch, path string) {
	f.t.Helper()
	if err := f.st.DeleteObject(f.ctx, branch, path); err != nil {
		f.t.Fatalf("delete %s:%s: %v", branch, path, err)
	}
}

// deleteBranch deletes branch; an error fails the test as step.
func (f *fixture) deleteBranch(step, branch string) {
	f.t.Helper()
	if err := f.st.DeleteBranch(f.ctx, branch); err != nil {
		f.t.Fatalf("%s: %v", step, err)
	}
}

// wantNoBranch checks that getting branch answers ErrBranchNotFound.
func (f *fixture) wantNoBranch(step, branch string) {
	f.t.Helper()
	_, err := f.st.GetBranch(f.ctx, branch)
	wantErr(f.t, step, err, artifacts.ErrBranchNotFound)
}

func (f *fixture) stat(ref, path string) artifacts.ObjectInfo {
	f.t.Helper()
	info, err := f.st.StatObject(f.ctx, ref, path)
	if err != nil {
		f.t.Fatalf("stat %s:%s: %v", ref, path, err)
	}
	return info
}

func (f *fixture) commit(branch, message string) artifacts.Commit {
	f.t.Helper()
	return f.commitWith(branch, message, nil)
}

func (f *fixture) commitWith(branch, message string, opts *artifacts.CommitOptions) artifacts.Commit {
	f.t.Helper()
	c, err := f.st.Commit(f.ctx, branch, message, opts)
	if err != nil {
		f.t.Fatalf("commit %s %q: %v", branch, message, err)
	}
	if c.ID == "" {
		f.t.Fatalf("commit %s %q: returned an empty commit id", branch, message)
	}
	return c
}

// putCommit stages one object and commits it, returning the commit.
func (f *fixture) putCommit(branch, path, content string) artifacts.Commit {
	f.t.Helper()
	f.put(branch, path, content)
	return f.commit(branch, "write "+path)
}

func (f *fixture) branch(name, from string) artifacts.Branch {
	f.t.Helper()
	b, err := f.st.CreateBranch(f.ctx, name, from)
	if err != nil {
		f.t.Fatalf("create branch %s from %s: %v", name, from, err)
	}
	return b
}

func (f *fixture) head(branch string) string {
	f.t.Helper()
	b, err := f.st.GetBranch(f.ctx, branch)
	if err != nil {
		f.t.Fatalf("get branch %s: %v", branch, err)
	}
	return b.CommitID
}

func (f *fixture) resolve(ref string) artifacts.Commit {
	f.t.Helper()
	c, err := f.st.ResolveRef(f.ctx, ref)
	if err != nil {
		f.t.Fatalf("resolve %s: %v", ref, err)
	}
	return c
}

// wantResolve checks that ref names the commit with id want.
func (f *fixture) wantResolve(ref, want string) {
	f.t.Helper()
	if got := f.resolve(ref).ID; got != want {
		f.t.Fatalf("resolve %s: got %s, want %s", ref, got, want)
	}
}

func (f *fixture) list(ref string, opts *artifacts.ListOptions) []artifacts.Entry {
	f.t.Helper()
	return collect(f.t, "list "+ref, f.st.ListObjects(f.ctx, ref, opts))
}

// listPaths lists ref and returns the entries' paths; common prefixes are
// suffixed with " (prefix)" so that a mismatch shows which kind differs.
func (f *fixture) listPaths(ref string, opts *artifacts.ListOptions) []string {
	f.t.Helper()
	return entryNames(f.list(ref, opts))
}

func entryNames(entries []artifacts.Entry) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.CommonPrefix {
			out = append(out, e.Path+" (prefix)")
		} else {
			out = append(out, e.Path)
		}
	}
	return out
}

func (f *fixture) log(ref string, opts *artifacts.LogOptions) []string {
	f.t.Helper()
	return commitIDs(collect(f.t, "log "+ref, f.st.Log(f.ctx, ref, opts)))
}

func commitIDs(cs []artifacts.Commit) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

// wantChanges checks a diff against want, in path order, comparing each
// change's type and path (sizes are backend-specific for removals).
func (f *fixture) wantChanges(step string, seq iter.Seq2[artifacts.Change, error], want ...string) {
	f.t.Helper()
	got := changeNames(collect(f.t, step, seq))
	if !slices.Equal(got, want) {
		f.t.Fatalf("%s: got changes %q, want %q", step, got, want)
	}
}

// changeNames formats changes as "type path".
func changeNames(cs []artifacts.Change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c.Type) + " " + c.Path
	}
	return out
}

// collect drains an iterator, failing the test on its first error.
func collect[T any](t *testing.T, step string, seq iter.Seq2[T, error]) []T {
	t.Helper()
	var out []T
	for v, err := range seq {
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		out = append(out, v)
	}
	return out
}

// wantErr checks that err matches at least one of targets with errors.Is.
func wantErr(t *testing.T, step string, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		if errors.Is(err, target) {
			return
		}
	}
	names := make([]string, len(targets))
	for i, target := range targets {
		names[i] = fmt.Sprintf("%q", target)
	}
	t.Fatalf("%s: got error %v, want one matching %s", step, err, strings.Join(names, " or "))
}

// wantEqual fails unless got == want.
func wantEqual[T comparable](t *testing.T, step string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", step, got, want)
	}
}

// wantSlice fails unless got and want hold the same elements in order.
func wantSlice[T comparable](t *testing.T, step string, got, want []T) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %v, want %v", step, got, want)
	}
}

// wantMap fails unless the maps hold the same pairs; nil equals empty.
func wantMap(t *testing.T, step string, got, want map[string]string) {
	t.Helper()
	if !maps.Equal(got, want) {
		t.Fatalf("%s: got %v, want %v", step, got, want)
	}
}

// readObject reads a whole object, closing the reader.
func readObject(ctx context.Context, st artifacts.Store, ref, path string) ([]byte, artifacts.ObjectInfo, error) {
	rc, info, err := st.GetObject(ctx, ref, path)
	if err != nil {
		return nil, info, err
	}
	b, err := io.ReadAll(rc)
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	return b, info, err
}

func stringReader(s string) io.Reader { return strings.NewReader(s) }

// collectErr drains an iterator and returns its first error.
func collectErr[T any](seq iter.Seq2[T, error]) ([]T, error) {
	var out []T
	for v, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
	return out, nil
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

func itoa(i int) string { return fmt.Sprint(i) }

// ability returns the store as the optional interface A, or skips the
// test when the store does not implement it.
func ability[A any](f *fixture) A {
	f.t.Helper()
	a, ok := f.st.(A)
	if !ok {
		f.t.Skip("store does not implement " + reflect.TypeFor[A]().String())
	}
	return a
}

// merger returns the store's Merger or skips the test.
func merger(f *fixture) artifacts.Merger { return ability[artifacts.Merger](f) }

// wantSet fails unless got and want hold the same elements, in any order.
func wantSet(t *testing.T, step string, got, want []string) {
	t.Helper()
	g, w := slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	if !slices.Equal(g, w) {
		t.Fatalf("%s: got %v, want %v in any order", step, got, want)
	}
}

func indexOf(s []string, v string) int { return slices.Index(s, v) }

func mapKeys[K comparable, V any](m map[K]V) iter.Seq[K] { return maps.Keys(m) }

// testingT is the part of testing.TB the assertion helpers use.
type testingT interface {
	Helper()
	Fatalf(format string, args ...any)
}

// puts stages each path, content pair on branch, in order.
func (f *fixture) puts(branch string, pathContent ...string) {
	f.t.Helper()
	f.eachPair("puts on "+branch, pathContent, func(path, content string) { f.put(branch, path, content) })
}

// wantContents checks each path, content pair at ref, in order.
func (f *fixture) wantContents(ref string, pathContent ...string) {
	f.t.Helper()
	f.eachPair("want contents at "+ref, pathContent, func(path, content string) { f.wantContent(ref, path, content) })
}

// eachPair calls do with each path, content pair of pc; an odd count is
// a mistake in the test and fails it.
func (f *fixture) eachPair(step string, pc []string, do func(path, content string)) {
	f.t.Helper()
	if len(pc)%2 != 0 {
		f.t.Fatalf("%s: %d arguments %q, want path, content pairs", step, len(pc), pc)
	}
	for i := 0; i < len(pc); i += 2 {
		do(pc[i], pc[i+1])
	}
}
