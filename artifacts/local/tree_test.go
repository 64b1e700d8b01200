package local_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
)

func collect[T any](t *testing.T, seq func(func(T, error) bool)) []T {
	t.Helper()
	var out []T
	for v, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// TestTreesAreCanonical builds the same contents along two histories and
// checks that the trees are identical, that a diff at scale lists exactly
// the changed paths, and that listings merge staged and committed entries.
func TestTreesAreCanonical(t *testing.T) {
	ctx := context.Background()
	s := artifactstest.NewLocal(t)
	const n = 1000
	for i := range n {
		put(t, s, "main", fmt.Sprintf("d/%05d", i), "v1")
	}
	c1, err := s.Commit(ctx, "main", "all", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateBranch(ctx, "b", "main"); err != nil {
		t.Fatal(err)
	}
	// On b: change 10, delete 5, add 5 in the middle.
	for i := 0; i < 10; i++ {
		put(t, s, "b", fmt.Sprintf("d/%05d", i*97), "v2")
	}
	for i := 0; i < 5; i++ {
		if err := s.DeleteObject(ctx, "b", fmt.Sprintf("d/%05d", i*190+1)); err != nil {
			t.Fatal(err)
		}
		put(t, s, "b", fmt.Sprintf("d/%05d.5", i*190+7), "new")
	}
	staged := collect(t, s.DiffUncommitted(ctx, "b"))
	if len(staged) != 20 {
		t.Fatalf("uncommitted changes = %d, want 20", len(staged))
	}
	listed := collect(t, s.ListObjects(ctx, "b", &artifacts.ListOptions{Prefix: "d/"}))
	if len(listed) != n || !slices.IsSortedFunc(listed, func(a, b artifacts.Entry) int { return strings.Compare(a.Path, b.Path) }) {
		t.Fatalf("listing b with staged changes: %d entries (sorted=%v), want %d", len(listed), slices.IsSortedFunc(listed, func(a, b artifacts.Entry) int { return strings.Compare(a.Path, b.Path) }), n)
	}
	c2, err := s.Commit(ctx, "b", "edit", nil)
	if err != nil {
		t.Fatal(err)
	}
	diff := collect(t, s.Diff(ctx, "main", "b", &artifacts.DiffOptions{TwoDot: true}))
	counts := map[artifacts.ChangeType]int{}
	for _, d := range diff {
		counts[d.Type]++
	}
	if counts[artifacts.ChangeModified] != 10 || counts[artifacts.ChangeRemoved] != 5 || counts[artifacts.ChangeAdded] != 5 {
		t.Fatalf("diff counts = %v, want 10 changed, 5 removed, 5 added", counts)
	}
	// Undo b's edit on a third branch by hand: the tree must equal main's.
	if _, err := s.CreateBranch(ctx, "c", "b"); err != nil {
		t.Fatal(err)
	}
	for _, d := range diff {
		switch d.Type {
		case artifacts.ChangeAdded:
			if err := s.DeleteObject(ctx, "c", d.Path); err != nil {
				t.Fatal(err)
			}
		default:
			put(t, s, "c", d.Path, "v1")
		}
	}
	if _, err := s.Commit(ctx, "c", "undo", nil); err != nil {
		t.Fatal(err)
	}
	if c2.MetaRangeID == c1.MetaRangeID {
		t.Fatalf("tree ids: main and b share tree %s after b changed", c1.MetaRangeID)
	}
	if d := collect(t, s.Diff(ctx, "main", "c", &artifacts.DiffOptions{TwoDot: true})); len(d) != 0 {
		t.Fatalf("diff of equal trees = %v, want none", d)
	}
	// Listing with a delimiter over many pages folds into one prefix.
	put(t, s, "main", "e", "x")
	got := collect(t, s.ListObjects(ctx, "main", &artifacts.ListOptions{Delimiter: "/"}))
	if len(got) != 2 || got[0].Path != "d/" || !got[0].CommonPrefix || got[1].Path != "e" {
		t.Fatalf("delimited listing = %+v, want d/ (prefix) and e", got)
	}
}
