package runs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// ReadRescoreReport reads the report a rescoring committed at ref
// (RescoreReportPath); nil, nil when ref holds none (it is not a
// rescoring).
func ReadRescoreReport(ctx context.Context, st artifacts.Store, ref string) (*tables.RescoreReport, error) {
	var rep tables.RescoreReport
	ok, err := readJSON(ctx, st, ref, RescoreReportPath, &rep)
	if err != nil || !ok {
		return nil, err
	}
	return &rep, nil
}

// Rescoring is a branch that rescored a run: it holds a rescore report
// whose source is the run's branch, or a ref relative to it
// ("runs-exp1~3").
type Rescoring struct {
	Branch string
	Commit string
	Report tables.RescoreReport
}

// Rescorings lists the branches that rescored run, in the store's branch
// order. A branch whose report cannot be read is an error naming it.
func Rescorings(ctx context.Context, st artifacts.Store, run string) iter.Seq2[Rescoring, error] {
	from := Branch(run)
	return func(yield func(Rescoring, error) bool) {
		for b, err := range st.ListBranches(ctx) {
			if err != nil {
				yield(Rescoring{}, fmt.Errorf("list branches: %w", err))
				return
			}
			if _, isRun := RunOf(b.Name); isRun || b.Name == from {
				continue
			}
			rep, err := ReadRescoreReport(ctx, st, b.CommitID)
			if err != nil && !errors.Is(err, artifacts.ErrNotFound) {
				if !yield(Rescoring{}, fmt.Errorf("branch %s: %w", b.Name, err)) {
					return
				}
				continue
			}
			if rep == nil || !rescored(rep.From, from) {
				continue
			}
			if !yield(Rescoring{Branch: b.Name, Commit: b.CommitID, Report: *rep}, nil) {
				return
			}
		}
	}
}

// rescored reports whether a rescoring of ref comes from branch: ref is
// the branch or an ancestor of its head named from it.
func rescored(ref, branch string) bool {
	rest, ok := strings.CutPrefix(ref, branch)
	return ok && (rest == "" || strings.ContainsRune("~^@", rune(rest[0])))
}

// ReadRewardMean reads iteration n's rewards table at ref and returns the
// mean total over its scored rows (tables.MeanTotal) and their number; an
// absent table is artifacts.ErrNotFound.
func ReadRewardMean(ctx context.Context, st artifacts.Store, ref string, n int) (mean float64, scored int, err error) {
	path := IterationPath(n, RewardsFile)
	rc, _, err := st.GetObject(ctx, ref, path)
	if err != nil {
		return 0, 0, fmt.Errorf("read %s:%s: %w", ref, path, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return 0, 0, fmt.Errorf("read %s:%s: %w", ref, path, err)
	}
	rows, err := tables.Read(bytes.NewReader(b), int64(len(b)), ref+":"+path, tables.Rewards)
	if err != nil {
		return 0, 0, err
	}
	mean, scored = tables.MeanTotal(rows)
	return mean, scored, nil
}
