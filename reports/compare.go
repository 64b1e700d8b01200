package reports

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// IterationReward is one iteration's mean total reward on both sides of a
// comparison (NaN when a side scored nothing).
type IterationReward struct {
	Iteration int     `json:"iteration"`
	Old       float64 `json:"old"`
	New       float64 `json:"new"`
}

// Comparison sets a rescored branch against its source: the rewards of the
// iterations both hold.
type Comparison struct {
	// Old is the source (the run's original rewards), New the rescored
	// side.
	Old, New             string
	OldCommit, NewCommit string
	// From says where Result came from: "<ref>:reports/rescore.json" when
	// a rescoring committed one (reused as is), else "computed".
	From         string
	Result       tables.RewardComparison
	PerIteration []IterationReward
	// Top are the most changed samples the report lists: by |Δ|, ties
	// newest iteration first (Result.Top, as stored, breaks them oldest
	// first, so equal changes fill it from iteration 1). Tied counts the
	// samples whose |Δ| equals the last listed one's, listed or not.
	Top  []tables.RewardChange
	Tied int
}

// topChanges is how many changed samples a report lists.
const topChanges = 10

// mostChanged picks the n samples whose total moved most, ties broken
// newest iteration first, then by prompt and sample, and counts the
// samples that tie with the last one picked.
func mostChanged(all []tables.RewardChange, n int) (top []tables.RewardChange, tied int) {
	all = slices.Clone(all)
	slices.SortFunc(all, tables.ByChange(true))
	top = all[:min(n, len(all))]
	if len(top) == 0 {
		return nil, 0
	}
	last := math.Abs(top[len(top)-1].Delta)
	for _, c := range all {
		if math.Abs(c.Delta) == last {
			tied++
		}
	}
	return top, tied
}

// Compare compares the rewards at ref and other. The side holding
// reports/rescore.json (written by `rlpipe rescore`) is the new one and
// its comparison is reused; without one, ref is the old side.
func Compare(ctx context.Context, st artifacts.Store, ref, other string) (*Comparison, error) {
	oldRef, newRef := ref, other
	var stored *tables.RescoreReport
	for _, r := range []string{other, ref} {
		rep, err := runs.ReadRescoreReport(ctx, st, r)
		if err != nil {
			return nil, err
		}
		if rep != nil {
			stored = rep
			if r == ref {
				oldRef, newRef = other, ref
			}
			break
		}
	}
	c := &Comparison{Old: oldRef, New: newRef, From: "computed"}
	for _, s := range []struct {
		ref string
		id  *string
	}{{oldRef, &c.OldCommit}, {newRef, &c.NewCommit}} {
		cm, err := st.ResolveRef(ctx, s.ref)
		if err != nil {
			return nil, fmt.Errorf("compare with %s: %w", s.ref, err)
		}
		*s.id = cm.ID
	}
	oldIters, err := Iterations(ctx, st, oldRef)
	if err != nil {
		return nil, err
	}
	newIters, err := Iterations(ctx, st, newRef)
	if err != nil {
		return nil, err
	}
	var oldSides, newSides []tables.IterationRewards
	for _, n := range oldIters {
		if !slices.Contains(newIters, n) {
			continue
		}
		path := runs.IterationPath(n, runs.RewardsFile)
		o, err := readTable(ctx, st, oldRef, path, tables.Rewards)
		if errors.Is(err, artifacts.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		nw, err := readTable(ctx, st, newRef, path, tables.Rewards)
		if errors.Is(err, artifacts.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		oldSides, newSides = append(oldSides, tables.IterationRewards{Iteration: n, Rows: o}), append(newSides, tables.IterationRewards{Iteration: n, Rows: nw})
		oldMean, _ := tables.MeanTotal(o)
		newMean, _ := tables.MeanTotal(nw)
		c.PerIteration = append(c.PerIteration, IterationReward{Iteration: n, Old: oldMean, New: newMean})
	}
	if len(c.PerIteration) == 0 {
		return nil, fmt.Errorf("compare %s with %s: %w: no iteration has rewards on both sides", oldRef, newRef, artifacts.ErrNotFound)
	}
	every := tables.CompareRewards(oldSides, newSides, math.MaxInt)
	c.Top, c.Tied = mostChanged(every.Top, topChanges)
	if stored != nil {
		c.Result, c.From = stored.Comparison, newRef+":"+runs.RescoreReportPath
	} else {
		c.Result = every
		c.Result.Top = every.Top[:min(topChanges, len(every.Top))]
	}
	return c, nil
}
