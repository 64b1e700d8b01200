package lakefs

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/internal/lakefsapi"
)

// Diff lists changes between two refs: three-dot (what right changed
// since the merge base) unless opts.TwoDot.
func (s *Store) Diff(ctx context.Context, left, right string, opts *artifacts.DiffOptions) iter.Seq2[artifacts.Change, error] {
	return func(yield func(artifacts.Change, error) bool) {
		what := fmt.Sprintf("diff %s...%s", left, right)
		o := artifacts.ValueOf(opts)
		typ := "three_dot"
		if o.TwoDot {
			typ = "two_dot"
			what = fmt.Sprintf("diff %s..%s", left, right)
		}
		l, err := refArg(left)
		if err == nil {
			right, err = refArg(right)
		}
		if err != nil {
			yield(artifacts.Change{}, fmt.Errorf("lakefs: %s: %w", what, err))
			return
		}
		q := url.Values{"type": {typ}}
		if o.Prefix != "" {
			q.Set("prefix", o.Prefix)
		}
		s.diff(ctx, s.repoPath("refs", l, "diff", right), q, what)(yield)
	}
}

// DiffUncommitted lists a branch's staged changes against its head.
func (s *Store) DiffUncommitted(ctx context.Context, branch string) iter.Seq2[artifacts.Change, error] {
	return func(yield func(artifacts.Change, error) bool) {
		what := fmt.Sprintf("diff uncommitted changes on branch %q", branch)
		if err := checkBranch(branch); err != nil {
			yield(artifacts.Change{}, fmt.Errorf("lakefs: %s: %w", what, err))
			return
		}
		s.diff(ctx, s.repoPath("branches", branch, "diff"), nil, what)(yield)
	}
}

func (s *Store) diff(ctx context.Context, path string, q url.Values, what string) iter.Seq2[artifacts.Change, error] {
	return func(yield func(artifacts.Change, error) bool) {
		for d, err := range paginate[lakefsapi.Diff](ctx, s.c, path, q, maxPageSize) {
			if err != nil {
				yield(artifacts.Change{}, s.c.translate(err, kinds{notFound: artifacts.ErrRefNotFound}, what))
				return
			}
			ch, ok := changeFromWire(d)
			if !ok {
				continue
			}
			if !yield(ch, nil) {
				return
			}
		}
	}
}

// Merge merges source into the destination branch and returns the merge
// commit. opts.Committer and opts.Date are ignored: the server sets both.
func (s *Store) Merge(ctx context.Context, source, destination string, opts *artifacts.MergeOptions) (artifacts.Commit, error) {
	what := fmt.Sprintf("merge %q into %q", source, destination)
	src, err := refArg(source)
	if err != nil {
		return artifacts.Commit{}, fmt.Errorf("lakefs: %s: %w", what, err)
	}
	if err := checkBranch(destination); err != nil {
		return artifacts.Commit{}, fmt.Errorf("lakefs: %s: %w", what, err)
	}
	var body lakefsapi.Merge
	if opts != nil {
		switch opts.Strategy {
		case artifacts.StrategyNone, artifacts.StrategySourceWins, artifacts.StrategyDestWins:
		default:
			return artifacts.Commit{}, fmt.Errorf("lakefs: %s: %w: strategy %q (want %q or %q)", what, artifacts.ErrInvalid, opts.Strategy, artifacts.StrategySourceWins, artifacts.StrategyDestWins)
		}
		body = lakefsapi.Merge{Message: opts.Message, Metadata: opts.Metadata, Strategy: string(opts.Strategy), AllowEmpty: opts.AllowEmpty}
	}
	var res lakefsapi.MergeResult
	err = s.c.call(ctx, http.MethodPost, s.repoPath("refs", src, "merge", destination), nil, body, &res)
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.Status == http.StatusConflict && !isDirty(strings.ToLower(ae.Message)) {
			return artifacts.Commit{}, s.conflict(ctx, source, destination, err)
		}
		err = s.c.translate(err, kinds{notFound: artifacts.ErrRefNotFound}, what)
		return artifacts.Commit{}, s.onWrite(ctx, destination, err)
	}
	if artifacts.IsCommitID(res.Reference) {
		return s.GetCommit(ctx, res.Reference)
	}
	b, err := s.GetBranch(ctx, destination)
	if err != nil {
		return artifacts.Commit{}, err
	}
	return s.GetCommit(ctx, b.CommitID)
}

// maxConflictChecks bounds the stats made to tell real conflicts from
// paths changed identically on both sides.
const maxConflictChecks = 1000

// conflict builds the *MergeConflictError for a merge the server refused
// with 409. lakeFS does not list the conflicting paths, so they are
// recomputed: paths changed on both sides since the merge base, less those
// that ended up identical (same checksum, or removed on both sides).
func (s *Store) conflict(ctx context.Context, source, destination string, cause error) error {
	mce := &artifacts.MergeConflictError{Source: source, Destination: destination}
	paths, err := s.conflictPaths(ctx, source, destination)
	if err != nil {
		// Still a conflict; say why the paths are missing.
		return fmt.Errorf("%w (listing the conflicting paths failed: %v; server: %v)", mce, err, cause)
	}
	mce.Paths = paths
	return mce
}

func (s *Store) conflictPaths(ctx context.Context, source, destination string) ([]string, error) {
	src, err := refArg(source)
	if err != nil {
		return nil, err
	}
	var mb lakefsapi.FindMergeBaseResult
	if err := s.c.call(ctx, http.MethodGet, s.repoPath("refs", src, "merge", destination), nil, nil, &mb); err != nil {
		return nil, s.c.translate(err, kinds{notFound: artifacts.ErrRefNotFound}, "find merge base")
	}
	changed := func(to string) (map[string]artifacts.ChangeType, error) {
		m := map[string]artifacts.ChangeType{}
		for ch, err := range s.Diff(ctx, mb.BaseCommitID, to, &artifacts.DiffOptions{TwoDot: true}) {
			if err != nil {
				return nil, err
			}
			m[ch.Path] = ch.Type
		}
		return m, nil
	}
	onSource, err := changed(mb.SourceCommitID)
	if err != nil {
		return nil, err
	}
	onDest, err := changed(mb.DestinationCommitID)
	if err != nil {
		return nil, err
	}
	var paths []string
	checks := 0
	for p, st := range onSource {
		dt, both := onDest[p]
		if !both || st == artifacts.ChangeRemoved && dt == artifacts.ChangeRemoved {
			continue
		}
		if st != artifacts.ChangeRemoved && dt != artifacts.ChangeRemoved && checks < maxConflictChecks {
			checks += 2
			// lakeFS's own checksums: equal bytes are equal there
			// whether or not each side recorded a SHA-256.
			a, aerr := s.stat(ctx, mb.SourceCommitID, p)
			b, berr := s.stat(ctx, mb.DestinationCommitID, p)
			if aerr == nil && berr == nil && a.Checksum == b.Checksum {
				continue
			}
		}
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths, nil
}

// MergeBase returns the best common ancestor of two refs.
func (s *Store) MergeBase(ctx context.Context, left, right string) (artifacts.Commit, error) {
	what := fmt.Sprintf("merge base of %q and %q", left, right)
	l, err := refArg(left)
	if err == nil {
		right, err = refArg(right)
	}
	if err != nil {
		return artifacts.Commit{}, fmt.Errorf("lakefs: %s: %w", what, err)
	}
	var mb lakefsapi.FindMergeBaseResult
	if err := s.c.call(ctx, http.MethodGet, s.repoPath("refs", l, "merge", right), nil, nil, &mb); err != nil {
		return artifacts.Commit{}, s.c.translate(err, kinds{notFound: artifacts.ErrRefNotFound}, what)
	}
	if mb.BaseCommitID == "" {
		return artifacts.Commit{}, fmt.Errorf("lakefs: %s: %w: no common ancestor", what, artifacts.ErrRefNotFound)
	}
	return s.GetCommit(ctx, mb.BaseCommitID)
}

// Revert commits the inverse of the commit ref names onto branch.
// parentNumber 0 means 1. lakeFS answers a revert with no body, so the
// commit returned is the branch head read right after.
func (s *Store) Revert(ctx context.Context, branch, ref string, parentNumber int, opts *artifacts.CommitOptions) (artifacts.Commit, error) {
	what := fmt.Sprintf("revert %q on branch %q", ref, branch)
	if err := checkBranch(branch); err != nil {
		return artifacts.Commit{}, fmt.Errorf("lakefs: %s: %w", what, err)
	}
	target, err := refArg(ref)
	if err != nil {
		return artifacts.Commit{}, fmt.Errorf("lakefs: %s: %w", what, err)
	}
	if parentNumber < 0 {
		return artifacts.Commit{}, fmt.Errorf("lakefs: %s: %w: parent number %d", what, artifacts.ErrInvalid, parentNumber)
	}
	if parentNumber == 0 {
		parentNumber = 1
	}
	body := lakefsapi.RevertCreation{Ref: target, ParentNumber: parentNumber}
	if opts != nil {
		body.AllowEmpty = opts.AllowEmpty
		if len(opts.Metadata) > 0 {
			body.CommitOverrides = &lakefsapi.CommitOverrides{Metadata: opts.Metadata}
		}
	}
	if err := s.c.call(ctx, http.MethodPost, s.repoPath("branches", branch, "revert"), nil, body, nil); err != nil {
		err = s.c.translate(err, kinds{notFound: artifacts.ErrRefNotFound, conflict: artifacts.ErrConflict}, what)
		return artifacts.Commit{}, s.onWrite(ctx, branch, err)
	}
	b, err := s.GetBranch(ctx, branch)
	if err != nil {
		return artifacts.Commit{}, err
	}
	return s.GetCommit(ctx, b.CommitID)
}
