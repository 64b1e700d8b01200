package artifactstest

import (
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
)

// NewStore returns a fresh, empty repository whose default branch "main"
// holds one initial commit and no objects. It registers its own cleanup
// with t.Cleanup and must be safe to call from parallel tests.
type NewStore = func(t *testing.T) artifacts.Store

// scenario is one behaviour checked against a fresh repository.
type scenario struct {
	name string
	run  func(f *fixture)
}

// Run checks that the stores newStore returns behave as the artifacts
// contract says, with lakeFS semantics. Each behaviour is a subtest with a
// repository of its own, and subtests run in parallel. Behaviours behind
// an optional interface (Merger, Reverter, Collector, RangeReader) are
// skipped when the store does not implement it.
func Run(t *testing.T, newStore NewStore) { RunSome(t, newStore, nil) }

// RunSome runs the scenarios keep accepts, by group and scenario name
// (the names of Run's subtests: "Objects", "RoundTrip"), against the
// stores newStore makes; keep nil runs them all. It is for a variant of a
// backend that changes one part of the contract's path (how objects
// travel, say): the variant runs what it changes, without the whole
// suite's time again.
func RunSome(t *testing.T, newStore NewStore, keep func(group, scenario string) bool) {
	groups := []struct {
		name      string
		scenarios []scenario
	}{
		{"Repository", repositoryScenarios},
		{"Objects", objectScenarios},
		{"Listing", listingScenarios},
		{"Staging", stagingScenarios},
		{"Branches", branchScenarios},
		{"Tags", tagScenarios},
		{"Refs", refScenarios},
		{"Log", logScenarios},
		{"Diff", diffScenarios},
		{"Merge", mergeScenarios},
		{"Revert", revertScenarios},
		{"GC", gcScenarios},
		{"Provenance", provenanceScenarios},
		{"Concurrency", concurrencyScenarios},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, s := range g.scenarios {
				if keep != nil && !keep(g.name, s.name) {
					continue
				}
				t.Run(s.name, func(t *testing.T) {
					t.Parallel()
					s.run(newFixture(t, newStore))
				})
			}
		})
	}
}

var repositoryScenarios = []scenario{
	{"Describe", func(f *fixture) {
		t := f.t
		if f.repo.Name == "" {
			t.Fatalf("repository: empty name")
		}
		wantEqual(t, "repository default branch", f.repo.DefaultBranch, "main")
		b, err := f.st.GetBranch(f.ctx, "main")
		if err != nil {
			t.Fatalf("get default branch: %v", err)
		}
		wantEqual(t, "default branch name", b.Name, "main")
		if b.CommitID == "" {
			t.Fatalf("default branch: no head commit")
		}
		wantEqual(t, "default branch head", b.CommitID, f.base.ID)
	}},
	{"StartsEmpty", func(f *fixture) {
		t := f.t
		wantSlice(t, "list main", f.listPaths("main", nil), []string{})
		f.wantChanges("diff uncommitted main", f.st.DiffUncommitted(f.ctx, "main"))
		branches := collect(t, "list branches", f.st.ListBranches(f.ctx))
		if len(branches) != 1 || branches[0].Name != "main" {
			t.Fatalf("list branches: got %v, want only main", branches)
		}
		tags := collect(t, "list tags", f.st.ListTags(f.ctx))
		if len(tags) != 0 {
			t.Fatalf("list tags: got %v, want none", tags)
		}
		if f.base.ID == "" {
			t.Fatalf("resolve main: empty commit id")
		}
		got, err := f.st.GetCommit(f.ctx, f.base.ID)
		if err != nil {
			t.Fatalf("get initial commit: %v", err)
		}
		wantEqual(t, "get initial commit id", got.ID, f.base.ID)
	}},
}
