package storeserver

import (
	"iter"
	"net/http"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/internal/lakefsapi"
)

func changePath(ch artifacts.Change) string { return ch.Path }

// diffRefs answers GET …/refs/{leftRef}/diff/{rightRef}: three-dot (what
// right changed since the merge base) unless type=two_dot.
func (s *Server) diffRefs(c *call) error {
	amount, err := c.amount()
	if err != nil {
		return err
	}
	left, right := c.p["leftRef"], c.p["rightRef"]
	opts := &artifacts.DiffOptions{Prefix: c.q.Get("prefix")}
	switch typ := c.q.Get("type"); typ {
	case "", "three_dot":
	case "two_dot":
		opts.TwoDot = true
	default:
		return errorf(http.StatusBadRequest, "diff %s %s: type %q: want two_dot or three_dot", left, right, typ)
	}
	return writePage(c, s.st.Diff(c.ctx(), left, right, opts), changePath, fromChange, c.q.Get("after"), amount)
}

// diffBranch answers GET …/branches/{branch}/diff: the staged changes.
func (s *Server) diffBranch(c *call) error {
	branch, err := c.branch("branch")
	if err != nil {
		return err
	}
	amount, err := c.amount()
	if err != nil {
		return err
	}
	changes := s.st.DiffUncommitted(c.ctx(), branch)
	if prefix := c.q.Get("prefix"); prefix != "" {
		changes = underPrefix(changes, prefix)
	}
	return writePage(c, changes, changePath, fromChange, c.q.Get("after"), amount)
}

// underPrefix keeps the changes whose path starts with prefix.
func underPrefix(seq iter.Seq2[artifacts.Change, error], prefix string) iter.Seq2[artifacts.Change, error] {
	return func(yield func(artifacts.Change, error) bool) {
		for ch, err := range seq {
			if err == nil && !strings.HasPrefix(ch.Path, prefix) {
				continue
			}
			if !yield(ch, err) {
				return
			}
		}
	}
}

// merge answers POST …/refs/{sourceRef}/merge/{destinationBranch} with
// the store's Merger.
func (s *Server) merge(c *call) error {
	dest, err := c.branch("destinationBranch")
	if err != nil {
		return err
	}
	src := c.p["sourceRef"]
	var body lakefsapi.Merge
	if err := decodeJSON(c.r, s.opts.MaxJSONBytes, &body, true); err != nil {
		return err
	}
	m, ok := s.st.(artifacts.Merger)
	if !ok {
		return errorf(http.StatusNotImplemented, "not supported: merge %s into %s: the store behind this server cannot merge (no artifacts.Merger)", src, dest)
	}
	if body.SquashMerge {
		return errorf(http.StatusNotImplemented, "not supported: merge %s into %s: squash merges; merge without squash_merge", src, dest)
	}
	strategy := artifacts.MergeStrategy(body.Strategy)
	switch strategy {
	case artifacts.StrategyNone, artifacts.StrategySourceWins, artifacts.StrategyDestWins:
	default:
		return errorf(http.StatusBadRequest, "merge %s into %s: strategy %q: want %s or %s", src, dest, body.Strategy, artifacts.StrategySourceWins, artifacts.StrategyDestWins)
	}
	cm, err := m.Merge(c.ctx(), src, dest, &artifacts.MergeOptions{
		Message: body.Message, Metadata: body.Metadata, Strategy: strategy, AllowEmpty: body.AllowEmpty,
	})
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, lakefsapi.MergeResult{Reference: cm.ID})
	return nil
}

// findMergeBase answers GET …/refs/{sourceRef}/merge/{destinationBranch}:
// the commits both refs name and their merge base. The destination may be
// any ref here.
func (s *Server) findMergeBase(c *call) error {
	m, ok := s.st.(artifacts.Merger)
	if !ok {
		return errorf(http.StatusNotImplemented, "not supported: merge base of %s and %s: the store behind this server cannot merge (no artifacts.Merger)", c.p["sourceRef"], c.p["destinationBranch"])
	}
	src, err := s.st.ResolveRef(c.ctx(), c.p["sourceRef"])
	if err != nil {
		return err
	}
	dst, err := s.st.ResolveRef(c.ctx(), c.p["destinationBranch"])
	if err != nil {
		return err
	}
	base, err := m.MergeBase(c.ctx(), src.ID, dst.ID)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, lakefsapi.FindMergeBaseResult{SourceCommitID: src.ID, DestinationCommitID: dst.ID, BaseCommitID: base.ID})
	return nil
}

// revert answers POST …/branches/{branch}/revert with the store's
// Reverter; like lakeFS, with no body.
func (s *Server) revert(c *call) error {
	branch, body, err := branchBody[lakefsapi.RevertCreation](s, c)
	if err != nil {
		return err
	}
	if body.Ref == "" {
		return errorf(http.StatusBadRequest, "revert on branch %q: the body names no ref (the commit to revert)", branch)
	}
	if body.ParentNumber < 0 {
		return errorf(http.StatusBadRequest, "revert %s on branch %q: parent_number %d: want 1 or more (the parent of a merge commit to revert against)", body.Ref, branch, body.ParentNumber)
	}
	rv, ok := s.st.(artifacts.Reverter)
	if !ok {
		return errorf(http.StatusNotImplemented, "not supported: revert %s on branch %q: the store behind this server cannot revert (no artifacts.Reverter)", body.Ref, branch)
	}
	opts := &artifacts.CommitOptions{AllowEmpty: body.AllowEmpty}
	if co := body.CommitOverrides; co != nil {
		if co.Message != "" {
			return errorf(http.StatusNotImplemented, "not supported: revert %s on branch %q: commit_overrides.message (the store names revert commits itself); leave it out", body.Ref, branch)
		}
		opts.Metadata = co.Metadata
	}
	if _, err := rv.Revert(c.ctx(), branch, body.Ref, body.ParentNumber, opts); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}
