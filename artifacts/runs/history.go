package runs

import (
	"context"
	"fmt"
	"iter"
	"strconv"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
)

// Commit is one iteration's commit of a run.
type Commit struct {
	artifacts.Commit
	// Iteration is the commit's MetaIteration.
	Iteration int
}

// IterationOf is the iteration a commit of run committed, ok false for a
// commit that is not one of run's iterations (an evaluation's, a
// rescoring's, another run's).
func IterationOf(c artifacts.Commit, run string) (n int, ok bool) {
	if c.Metadata[MetaRun] != run {
		return 0, false
	}
	n, err := strconv.Atoi(c.Metadata[MetaIteration])
	return n, err == nil
}

// History walks run's iteration commits from head along first parents,
// newest first. Commits between them that are not iterations (an
// evaluation's, a rescoring's, a user's) are passed over; the walk ends
// where the run branched off (the first commit below its iterations that
// is not run's) or at iteration 1. A branch without any iteration of run
// is walked to its root.
func History(ctx context.Context, st artifacts.Store, run, head string) iter.Seq2[Commit, error] {
	return func(yield func(Commit, error) bool) {
		seen := false
		for c, err := range st.Log(ctx, head, &artifacts.LogOptions{FirstParent: true}) {
			if err != nil {
				yield(Commit{}, fmt.Errorf("history of run %s: %w", run, err))
				return
			}
			n, ok := IterationOf(c, run)
			if !ok {
				if seen && c.Metadata[MetaRun] != run {
					return // below the run's first iteration
				}
				continue // a commit on top: an evaluation's, a rescoring's, a user's
			}
			seen = true
			if !yield(Commit{Commit: c, Iteration: n}, nil) || n == 1 {
				return
			}
		}
	}
}

// Info is one run of a store, as List reports it.
type Info struct {
	Run    string `json:"run"`
	Branch string `json:"branch"`
	// Iteration is the last committed iteration; 0 for none.
	Iteration int       `json:"iteration"`
	Commit    string    `json:"commit"`
	Date      time.Time `json:"date"`
}

// List lists the runs of a store: its branches runs-NAME, in the store's
// branch order, with their head and their last iteration.
func List(ctx context.Context, st artifacts.Store) ([]Info, error) {
	out := []Info{}
	for b, err := range st.ListBranches(ctx) {
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		run, ok := RunOf(b.Name)
		if !ok {
			continue
		}
		c, err := st.GetCommit(ctx, b.CommitID)
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", run, err)
		}
		row := Info{Run: run, Branch: b.Name, Commit: c.ID, Date: c.CreationDate.UTC()}
		// The head may be an evaluation's commit: the last iteration is
		// the first iteration commit below it.
		for it, err := range History(ctx, st, run, c.ID) {
			if err != nil {
				return nil, err
			}
			row.Iteration = it.Iteration
			break
		}
		out = append(out, row)
	}
	return out, nil
}
