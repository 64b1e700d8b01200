package artifactstest

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/rlpipe/rlpipe/artifacts"
)

var concurrencyScenarios = []scenario{
	{"BranchPerWriter", testConcurrentBranches},
	{"SharedBranch", testConcurrentSharedBranch},
}

const (
	concurrentBranches = 8
	sharedWriters      = 4
	commitsPerWriter   = 5
	// maxRetries bounds the retries of one commit on ErrConcurrentUpdate.
	maxRetries = 100
)

// testConcurrentBranches has 8 writers each commit to a branch of its
// own; every branch ends with exactly its writer's commits on top of main.
func testConcurrentBranches(f *fixture) {
	t := f.t
	base := f.putCommit("main", "base", "b")
	commits := make([][]string, concurrentBranches) // per writer, newest first
	g, ctx := errgroup.WithContext(f.ctx)
	for w := range concurrentBranches {
		g.Go(func() error {
			branch := fmt.Sprintf("writer-%d", w)
			if _, err := f.st.CreateBranch(ctx, branch, "main"); err != nil {
				return fmt.Errorf("create %s: %w", branch, err)
			}
			for i := range commitsPerWriter {
				p := fmt.Sprintf("%s/%d", branch, i)
				if _, err := f.st.PutObject(ctx, branch, p, strings.NewReader(p), nil); err != nil {
					return fmt.Errorf("put %s: %w", p, err)
				}
				c, err := f.st.Commit(ctx, branch, "write "+p, nil)
				if err != nil {
					return fmt.Errorf("commit %s: %w", p, err)
				}
				commits[w] = append([]string{c.ID}, commits[w]...)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("concurrent writers: %v", err)
	}
	for w := range concurrentBranches {
		branch := fmt.Sprintf("writer-%d", w)
		want := append(slices.Clone(commits[w]), base.ID, f.base.ID)
		wantSlice(t, "log "+branch, f.log(branch, nil), want)
		var paths []string
		for i := range commitsPerWriter {
			paths = append(paths, fmt.Sprintf("%s/%d", branch, i))
		}
		wantSlice(t, "list "+branch+"@", f.listPaths(branch+"@", &artifacts.ListOptions{Prefix: "writer-"}), paths)
	}
	wantEqual(t, "main head after writers", f.head("main"), base.ID)
}

// testConcurrentSharedBranch has 4 writers commit to main at once,
// retrying on ErrConcurrentUpdate: no commit may be lost or repeated.
func testConcurrentSharedBranch(f *fixture) {
	t := f.t
	ids := make([][]string, sharedWriters)
	g, ctx := errgroup.WithContext(f.ctx)
	for w := range sharedWriters {
		g.Go(func() error {
			for i := range commitsPerWriter {
				p := fmt.Sprintf("shared/%d-%d", w, i)
				if _, err := f.st.PutObject(ctx, "main", p, strings.NewReader(p), nil); err != nil {
					return fmt.Errorf("put %s: %w", p, err)
				}
				// Another writer's commit may already have taken this
				// object, so the commit may be empty.
				opts := &artifacts.CommitOptions{AllowEmpty: true, Metadata: map[string]string{"writer": p}}
				var c artifacts.Commit
				var err error
				for range maxRetries {
					c, err = f.st.Commit(ctx, "main", "write "+p, opts)
					if !errors.Is(err, artifacts.ErrConcurrentUpdate) {
						break
					}
				}
				if err != nil {
					return fmt.Errorf("commit %s: %w", p, err)
				}
				ids[w] = append(ids[w], c.ID)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("concurrent writers on one branch: %v", err)
	}

	log := collect(t, "log main", f.st.Log(f.ctx, "main", nil))
	wantEqual(t, "log main: commits", len(log), sharedWriters*commitsPerWriter+1)
	wantEqual(t, "log main: oldest", log[len(log)-1].ID, f.base.ID)
	seen := map[string]int{}
	writers := map[string]int{}
	for i, c := range log {
		seen[c.ID]++
		if i < len(log)-1 {
			writers[c.Metadata["writer"]]++
			// History is a line: each commit's parent is the next one.
			wantSlice(t, "log main: parents of commit "+itoa(i), c.Parents, []string{log[i+1].ID})
		}
	}
	for w := range sharedWriters {
		for i, id := range ids[w] {
			wantEqual(t, "log main: occurrences of "+id, seen[id], 1)
			wantEqual(t, "log main: commits by writer "+fmt.Sprintf("shared/%d-%d", w, i), writers[fmt.Sprintf("shared/%d-%d", w, i)], 1)
		}
	}
	f.wantChanges("diff uncommitted after writers", f.st.DiffUncommitted(f.ctx, "main"))
	wantEqual(t, "list main@: objects", len(f.listPaths("main@", &artifacts.ListOptions{Prefix: "shared/"})), sharedWriters*commitsPerWriter)
}
