package storeserver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
)

// heldCommit is a store whose commits wait, once inside, until the test
// releases them: with Faults.CommitWindow the window stays open for as
// long as the test needs, whatever the machine's speed.
type heldCommit struct {
	artifacts.Store
	entered, release chan struct{}
}

func (h *heldCommit) Commit(ctx context.Context, branch, msg string, opts *artifacts.CommitOptions) (artifacts.Commit, error) {
	close(h.entered)
	<-h.release
	return h.Store.Commit(ctx, branch, msg, opts)
}

// While a commit of a branch is in flight, the commit-window fault
// answers 404 for exactly the objects the branch had staged when the
// commit began: committed objects, objects staged during the commit and
// other branches read as usual, and once the commit lands, so does
// everything.
func TestCommitWindowMissesStagedReadsDuringACommit(t *testing.T) {
	ctx := context.Background()
	backing := newLocal(t)
	put := func(st artifacts.Store, branch, path string) {
		t.Helper()
		if _, err := st.PutObject(ctx, branch, path, strings.NewReader(path), nil); err != nil {
			t.Fatal(err)
		}
	}
	put(backing, "main", "committed.txt")
	if _, err := backing.Commit(ctx, "main", "one", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := backing.CreateBranch(ctx, "other", "main"); err != nil {
		t.Fatal(err)
	}
	put(backing, "main", "staged.txt")
	put(backing, "other", "staged.txt")

	held := &heldCommit{Store: backing, entered: make(chan struct{}), release: make(chan struct{})}
	srv, url := artifactstest.Serve(t, held, &storeserver.Options{AccessKeyID: testKey, SecretAccessKey: testSecret,
		Faults: storeserver.Faults{CommitWindow: time.Nanosecond}})
	st := open(t, url, testKey, testSecret)

	committed := make(chan error, 1)
	go func() {
		_, err := st.Commit(ctx, "main", "two", nil)
		committed <- err
	}()
	<-held.entered
	stat := func(ref, path string) error {
		_, err := st.StatObject(ctx, ref, path)
		return err
	}
	if err := stat("main", "staged.txt"); !errors.Is(err, artifacts.ErrNotFound) {
		t.Errorf("stat of a staged object during the commit: %v, want not found", err)
	}
	if _, _, err := st.GetObject(ctx, "main", "staged.txt"); !errors.Is(err, artifacts.ErrNotFound) {
		t.Errorf("get of a staged object during the commit: %v, want not found", err)
	}
	put(st, "main", "during.txt")
	for _, read := range [][2]string{{"main", "committed.txt"}, {"main", "during.txt"}, {"other", "staged.txt"}} {
		if err := stat(read[0], read[1]); err != nil {
			t.Errorf("stat %s:%s during the commit: %v", read[0], read[1], err)
		}
	}
	close(held.release)
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	if err := stat("main", "staged.txt"); err != nil {
		t.Errorf("stat after the commit landed: %v", err)
	}
	if got := srv.FaultMisses(); got != 2 {
		t.Errorf("FaultMisses = %d, want 2 (one stat, one get)", got)
	}
}

// The whole conformance suite holds through the commit-window fault:
// lakeFS's race costs no behaviour a pipeline relies on when nothing
// reads a branch while committing it (the engine's own reads retry, see
// pipeline/run.go downloadFile).
func TestConformanceThroughCommitWindows(t *testing.T) {
	artifactstest.Run(t, func(t *testing.T) artifacts.Store {
		backing := newLocal(t)
		url := serve(t, backing, &storeserver.Options{AccessKeyID: testKey, SecretAccessKey: testSecret,
			Faults: storeserver.Faults{CommitWindow: 2 * time.Millisecond}})
		return open(t, url, testKey, testSecret)
	})
}

func TestParseFaults(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want storeserver.Faults
		err  string
	}{
		{in: "", want: storeserver.Faults{}},
		{in: "none", want: storeserver.Faults{}},
		{in: "miss-staged-once", want: storeserver.Faults{MissStagedOnce: true}},
		{in: "commit-window=20ms", want: storeserver.Faults{CommitWindow: 20 * time.Millisecond}},
		{in: "commit-window=1s, miss-staged-once", want: storeserver.Faults{MissStagedOnce: true, CommitWindow: time.Second}},
		{in: "md5-checksums,commit-window=250ms", want: storeserver.Faults{MD5Checksums: true, CommitWindow: 250 * time.Millisecond}},
		{in: "commit-window=0s", err: `fault "commit-window=0s": want a positive duration such as commit-window=20ms`},
		{in: "commit-window", err: `unknown fault "commit-window": want miss-staged-once, commit-window=DURATION or md5-checksums`},
		{in: "slow", err: `unknown fault "slow": want miss-staged-once, commit-window=DURATION or md5-checksums`},
	} {
		got, err := storeserver.ParseFaults(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("ParseFaults(%q): error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseFaults(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		if back, err := storeserver.ParseFaults(got.String()); err != nil || back != got {
			t.Errorf("ParseFaults(%q.String() = %q) = %+v, %v", tc.in, got.String(), back, err)
		}
	}
}
