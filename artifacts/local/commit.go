package local

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/rlpipe/rlpipe/artifacts"
)

// newCommit fills in generation, date and id, and stores the commit.
func (s *Store) newCommit(tx *bolt.Tx, parents []string, metaID, message, committer string, date time.Time, meta map[string]string) (artifacts.Commit, error) {
	gen := 0
	for _, p := range parents {
		pc, err := getCommit(tx, p)
		if err != nil {
			return artifacts.Commit{}, err
		}
		gen = max(gen, pc.Generation)
	}
	if date.IsZero() {
		date = time.Now()
	}
	c := artifacts.Commit{
		Parents:      parents,
		Committer:    s.committer(committer),
		Message:      message,
		CreationDate: date.UTC().Truncate(time.Second),
		Metadata:     meta,
		MetaRangeID:  metaID,
		Generation:   gen + 1,
	}
	if len(c.Metadata) == 0 {
		c.Metadata = nil
	}
	id, err := commitID(c)
	if err != nil {
		return artifacts.Commit{}, err
	}
	c.ID = id
	return c, putJSON(tx.Bucket(bucketCommits), []byte(c.ID), c)
}

// moveBranch sets a branch head, failing if it is no longer at expect.
func moveBranch(tx *bolt.Tx, name, expect, to string) error {
	b, err := getBranch(tx, name)
	if err != nil {
		return err
	}
	if b.CommitID != expect {
		return fmt.Errorf("%w: branch %q moved from %s to %s while this operation ran; retry it", artifacts.ErrConcurrentUpdate, name, short(expect), short(b.CommitID))
	}
	b.CommitID = to
	return putJSON(tx.Bucket(bucketBranches), []byte(name), b)
}

// Commit records the branch's staged changes. The new tree, the commit,
// the branch move and the cleared staging area land in one transaction:
// after a crash the branch is at the old commit or the new one.
func (s *Store) Commit(ctx context.Context, branch, message string, opts *artifacts.CommitOptions) (artifacts.Commit, error) {
	if opts == nil {
		opts = &artifacts.CommitOptions{}
	}
	var c artifacts.Commit
	err := s.update(ctx, func(tx *bolt.Tx) error {
		if err := writableBranch(tx, branch); err != nil {
			return err
		}
		head, err := branchHead(tx, branch)
		if err != nil {
			return err
		}
		chs, err := stagedChanges(tx, branch, "")
		if err != nil {
			return err
		}
		if len(chs) == 0 && !opts.AllowEmpty {
			return fmt.Errorf("%w: nothing is staged on %q (put objects first, or allow an empty commit)", artifacts.ErrNoChanges, branch)
		}
		metaID, err := s.trees(tx).apply(head.MetaRangeID, chs)
		if err != nil {
			return err
		}
		c, err = s.newCommit(tx, []string{head.ID}, metaID, message, opts.Committer, opts.Date, copyMeta(opts.Metadata))
		if err != nil {
			return err
		}
		if err := moveBranch(tx, branch, head.ID, c.ID); err != nil {
			return err
		}
		if stagingOf(tx, branch) != nil {
			return tx.Bucket(bucketStaging).DeleteBucket([]byte(branch))
		}
		return nil
	})
	if err != nil {
		return artifacts.Commit{}, fmt.Errorf("commit %s: %w", branch, err)
	}
	return c, nil
}

func copyMeta(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// newestFirst orders commits for Log: by date, then generation, then id,
// the highest first.
func newestFirst(a, b artifacts.Commit) bool {
	if !a.CreationDate.Equal(b.CreationDate) {
		return a.CreationDate.After(b.CreationDate)
	}
	if a.Generation != b.Generation {
		return a.Generation > b.Generation
	}
	return a.ID > b.ID
}

// highestGeneration orders commits for mergeBase: by generation, the
// highest first.
func highestGeneration(a, b artifacts.Commit) bool { return a.Generation > b.Generation }

// commitHeap is a container/heap of commits in the order less gives.
type commitHeap struct {
	commits []artifacts.Commit
	less    func(a, b artifacts.Commit) bool
}

func (h *commitHeap) Len() int           { return len(h.commits) }
func (h *commitHeap) Less(i, j int) bool { return h.less(h.commits[i], h.commits[j]) }
func (h *commitHeap) Swap(i, j int)      { h.commits[i], h.commits[j] = h.commits[j], h.commits[i] }
func (h *commitHeap) Push(x any)         { h.commits = append(h.commits, x.(artifacts.Commit)) }
func (h *commitHeap) Pop() any {
	c := h.commits[len(h.commits)-1]
	h.commits = h.commits[:len(h.commits)-1]
	return c
}

// commitWalk walks history from one commit, in the order less gives:
// Log's and mergeBase's walk. Each commit is queued once.
type commitWalk struct {
	h    commitHeap
	seen map[string]bool // ids queued so far
}

func newCommitWalk(start artifacts.Commit, less func(a, b artifacts.Commit) bool) *commitWalk {
	return &commitWalk{h: commitHeap{commits: []artifacts.Commit{start}, less: less}, seen: map[string]bool{start.ID: true}}
}

// more reports whether commits are left to visit.
func (w *commitWalk) more() bool { return w.h.Len() > 0 }

// next returns the first commit left to visit.
func (w *commitWalk) next() artifacts.Commit { return heap.Pop(&w.h).(artifacts.Commit) }

// queue reads and queues the commits of ids not queued before, in order.
func (w *commitWalk) queue(tx *bolt.Tx, ids []string) error {
	for _, id := range ids {
		if w.seen[id] {
			continue
		}
		w.seen[id] = true
		c, err := getCommit(tx, id)
		if err != nil {
			return err
		}
		heap.Push(&w.h, c)
	}
	return nil
}

// Log walks history newest first. Each batch of commits is read in its own
// short transaction so a long walk does not hold the store.
func (s *Store) Log(ctx context.Context, ref string, opts *artifacts.LogOptions) iter.Seq2[artifacts.Commit, error] {
	o := artifacts.ValueOf(opts)
	filtered := len(o.Paths) > 0 || len(o.Prefixes) > 0
	return func(yield func(artifacts.Commit, error) bool) {
		var w *commitWalk
		err := s.view(ctx, func(tx *bolt.Tx) error {
			v, err := resolve(tx, ref)
			if err != nil {
				return err
			}
			w = newCommitWalk(v.commit, newestFirst)
			return nil
		})
		if err != nil {
			yield(artifacts.Commit{}, fmt.Errorf("log %s: %w", ref, err))
			return
		}
		emitted := 0
		for w.more() {
			var batch []artifacts.Commit
			err := s.view(ctx, func(tx *bolt.Tx) error {
				for w.more() && len(batch) < 256 {
					c := w.next()
					parents := c.Parents
					if o.FirstParent && len(parents) > 1 {
						parents = parents[:1]
					}
					if err := w.queue(tx, parents); err != nil {
						return err
					}
					if filtered {
						ok, err := s.touches(tx, c, o.Paths, o.Prefixes)
						if err != nil {
							return err
						}
						if !ok {
							continue
						}
					}
					batch = append(batch, c)
				}
				return nil
			})
			if err != nil {
				yield(artifacts.Commit{}, fmt.Errorf("log %s: %w", ref, err))
				return
			}
			for _, c := range batch {
				if !yield(c, nil) {
					return
				}
				emitted++
				if o.Limit > 0 && emitted >= o.Limit {
					return
				}
			}
			if err := ctx.Err(); err != nil {
				yield(artifacts.Commit{}, err)
				return
			}
		}
	}
}

// touches reports whether c changed one of paths, or something under one
// of prefixes, relative to its first parent.
func (s *Store) touches(tx *bolt.Tx, c artifacts.Commit, paths, prefixes []string) (bool, error) {
	parentMeta := emptyMetaRangeID
	if len(c.Parents) > 0 {
		p, err := getCommit(tx, c.Parents[0])
		if err != nil {
			return false, err
		}
		parentMeta = p.MetaRangeID
	}
	t := s.trees(tx)
	for _, p := range paths {
		a, err := t.lookup(parentMeta, p)
		if err != nil {
			return false, err
		}
		b, err := t.lookup(c.MetaRangeID, p)
		if err != nil {
			return false, err
		}
		if _, changed := describe(p, a, b); changed {
			return true, nil
		}
	}
	for _, p := range prefixes {
		found := false
		err := t.treeDiff(parentMeta, c.MetaRangeID, p, func(string, *entry, *entry) (bool, error) {
			found = true
			return false, nil
		})
		if err != nil || found {
			return found, err
		}
	}
	return false, nil
}

// Diff lists changes between two refs (three-dot unless opts.TwoDot).
func (s *Store) Diff(ctx context.Context, left, right string, opts *artifacts.DiffOptions) iter.Seq2[artifacts.Change, error] {
	o := artifacts.ValueOf(opts)
	return func(yield func(artifacts.Change, error) bool) {
		var out []artifacts.Change
		err := s.view(ctx, func(tx *bolt.Tx) error {
			l, r, err := resolvePair(tx, left, right)
			if err != nil {
				return err
			}
			leftMeta := l.commit.MetaRangeID
			if !o.TwoDot {
				base, err := mergeBase(tx, l.commit, r.commit)
				if err != nil {
					return err
				}
				leftMeta = base.MetaRangeID
			}
			return s.trees(tx).treeDiff(leftMeta, r.commit.MetaRangeID, o.Prefix, func(p string, a, b *entry) (bool, error) {
				if d, ok := describe(p, a, b); ok {
					out = append(out, d)
				}
				return true, nil
			})
		})
		if err != nil {
			err = fmt.Errorf("diff %s %s: %w", left, right, err)
		}
		yieldAll(yield, out, err)
	}
}

// reachableFrom returns the ids of the commits roots hold and all their
// ancestors.
func reachableFrom(tx *bolt.Tx, roots []string) (map[string]bool, error) {
	reachable := map[string]bool{}
	for len(roots) > 0 {
		id := roots[len(roots)-1]
		roots = roots[:len(roots)-1]
		if reachable[id] {
			continue
		}
		reachable[id] = true
		c, err := getCommit(tx, id)
		if err != nil {
			return nil, err
		}
		roots = append(roots, c.Parents...)
	}
	return reachable, nil
}

// mergeBase finds the best common ancestor: walking b's history newest
// generation first, the first commit that is also an ancestor of a.
func mergeBase(tx *bolt.Tx, a, b artifacts.Commit) (artifacts.Commit, error) {
	if a.ID == b.ID {
		return a, nil
	}
	ancestors, err := reachableFrom(tx, []string{a.ID})
	if err != nil {
		return artifacts.Commit{}, err
	}
	w := newCommitWalk(b, highestGeneration)
	for w.more() {
		c := w.next()
		if ancestors[c.ID] {
			return c, nil
		}
		if err := w.queue(tx, c.Parents); err != nil {
			return artifacts.Commit{}, err
		}
	}
	return artifacts.Commit{}, fmt.Errorf("%w: commits %s and %s share no history", artifacts.ErrNotFound, short(a.ID), short(b.ID))
}

// MergeBase returns the best common ancestor of two refs.
func (s *Store) MergeBase(ctx context.Context, left, right string) (artifacts.Commit, error) {
	c, err := viewGet(s, ctx, func(tx *bolt.Tx) (artifacts.Commit, error) {
		l, r, err := resolvePair(tx, left, right)
		if err != nil {
			return artifacts.Commit{}, err
		}
		return mergeBase(tx, l.commit, r.commit)
	})
	if err != nil {
		return c, fmt.Errorf("merge base %s %s: %w", left, right, err)
	}
	return c, nil
}

// resolvePair resolves the two refs of a diff or a merge base, left first.
func resolvePair(tx *bolt.Tx, left, right string) (l, r view, err error) {
	if l, err = resolve(tx, left); err != nil {
		return view{}, view{}, err
	}
	if r, err = resolve(tx, right); err != nil {
		return view{}, view{}, err
	}
	return l, r, nil
}

// threeWay applies what source changed since base onto dest's tree. It
// returns the changes to apply and the conflicting paths.
func (s *Store) threeWay(tx *bolt.Tx, baseMeta, sourceMeta, destMeta string, strategy artifacts.MergeStrategy) ([]change, []string, error) {
	t := s.trees(tx)
	var srcChanges []change
	err := t.treeDiff(baseMeta, sourceMeta, "", func(p string, _, b *entry) (bool, error) {
		srcChanges = append(srcChanges, change{Path: p, Entry: b})
		return true, nil
	})
	if err != nil {
		return nil, nil, err
	}
	var apply []change
	var conflicts []string
	for _, ch := range srcChanges {
		baseE, err := t.lookup(baseMeta, ch.Path)
		if err != nil {
			return nil, nil, err
		}
		destE, err := t.lookup(destMeta, ch.Path)
		if err != nil {
			return nil, nil, err
		}
		_, destChanged := describe(ch.Path, baseE, destE)
		_, differs := describe(ch.Path, destE, ch.Entry)
		switch {
		case !differs: // dest already has the source's version
		case !destChanged:
			apply = append(apply, ch)
		case strategy == artifacts.StrategySourceWins:
			apply = append(apply, ch)
		case strategy == artifacts.StrategyDestWins:
		default:
			conflicts = append(conflicts, ch.Path)
		}
	}
	return apply, conflicts, nil
}

// cleanHead returns the head commit of a branch without staged changes.
func cleanHead(tx *bolt.Tx, branch string) (artifacts.Commit, error) {
	if err := writableBranch(tx, branch); err != nil {
		return artifacts.Commit{}, err
	}
	if err := requireClean(tx, branch); err != nil {
		return artifacts.Commit{}, err
	}
	return branchHead(tx, branch)
}

// threeWayCommit describes a merge-like commit: what source changed since
// base, applied onto head, committed on branch with the given parents.
type threeWayCommit struct {
	branch         string
	head           artifacts.Commit
	base, source   string // metarange ids
	strategy       artifacts.MergeStrategy
	conflictSource string // names the source side in a conflict error
	noChanges      string // says what brought nothing
	allowEmpty     bool
	parents        []string
	message        string
	committer      string
	date           time.Time
	meta           map[string]string
}

// commitThreeWay is the shared body of Merge and Revert.
func (s *Store) commitThreeWay(tx *bolt.Tx, w threeWayCommit) (artifacts.Commit, error) {
	apply, conflicts, err := s.threeWay(tx, w.base, w.source, w.head.MetaRangeID, w.strategy)
	if err != nil {
		return artifacts.Commit{}, err
	}
	if len(conflicts) > 0 {
		return artifacts.Commit{}, &artifacts.MergeConflictError{Source: w.conflictSource, Destination: w.branch, Paths: conflicts}
	}
	if len(apply) == 0 && !w.allowEmpty {
		return artifacts.Commit{}, fmt.Errorf("%w: %s", artifacts.ErrNoChanges, w.noChanges)
	}
	metaID, err := s.trees(tx).apply(w.head.MetaRangeID, apply)
	if err != nil {
		return artifacts.Commit{}, err
	}
	c, err := s.newCommit(tx, w.parents, metaID, w.message, w.committer, w.date, copyMeta(w.meta))
	if err != nil {
		return artifacts.Commit{}, err
	}
	return c, moveBranch(tx, w.branch, w.head.ID, c.ID)
}

// updateThreeWay is the transaction of Merge and Revert: on branch, which
// must have no staged changes, it commits the three-way merge plan
// describes (plan is given the branch's head; branch and head are filled
// in). A conflict is returned as the *artifacts.MergeConflictError it is;
// any other error is prefixed with what ("merge a into b").
func (s *Store) updateThreeWay(ctx context.Context, what, branch string, plan func(tx *bolt.Tx, head artifacts.Commit) (threeWayCommit, error)) (artifacts.Commit, error) {
	var c artifacts.Commit
	err := s.update(ctx, func(tx *bolt.Tx) error {
		head, err := cleanHead(tx, branch)
		if err != nil {
			return err
		}
		w, err := plan(tx, head)
		if err != nil {
			return err
		}
		w.branch, w.head = branch, head
		c, err = s.commitThreeWay(tx, w)
		return err
	})
	if err != nil {
		if conflict := (*artifacts.MergeConflictError)(nil); errors.As(err, &conflict) {
			return artifacts.Commit{}, err
		}
		return artifacts.Commit{}, fmt.Errorf("%s: %w", what, err)
	}
	return c, nil
}

func requireClean(tx *bolt.Tx, branch string) error {
	st := stagingOf(tx, branch)
	if st == nil {
		return nil
	}
	if k, _ := st.Cursor().First(); k != nil {
		return fmt.Errorf("%w: %q (commit them with `rlpipe commit %s -m MSG` or drop them with `rlpipe branch reset %s`)", artifacts.ErrDirtyBranch, branch, branch, branch)
	}
	return nil
}

// Merge merges source into the destination branch.
func (s *Store) Merge(ctx context.Context, source, destination string, opts *artifacts.MergeOptions) (artifacts.Commit, error) {
	if opts == nil {
		opts = &artifacts.MergeOptions{}
	}
	switch opts.Strategy {
	case artifacts.StrategyNone, artifacts.StrategySourceWins, artifacts.StrategyDestWins:
	default:
		return artifacts.Commit{}, fmt.Errorf("merge %s into %s: %w: strategy %q (use source-wins or dest-wins)", source, destination, artifacts.ErrInvalid, opts.Strategy)
	}
	return s.updateThreeWay(ctx, "merge "+source+" into "+destination, destination, func(tx *bolt.Tx, dest artifacts.Commit) (threeWayCommit, error) {
		src, err := resolve(tx, source)
		if err != nil {
			return threeWayCommit{}, err
		}
		base, err := mergeBase(tx, src.commit, dest)
		if err != nil {
			return threeWayCommit{}, err
		}
		msg := opts.Message
		if msg == "" {
			msg = fmt.Sprintf("Merge '%s' into '%s'", source, destination)
		}
		return threeWayCommit{
			base: base.MetaRangeID, source: src.commit.MetaRangeID,
			strategy: opts.Strategy, conflictSource: source, allowEmpty: opts.AllowEmpty,
			noChanges: fmt.Sprintf("%s brings nothing new to %s", source, destination),
			parents:   []string{dest.ID, src.commit.ID},
			message:   msg, committer: opts.Committer, date: opts.Date, meta: opts.Metadata,
		}, nil
	})
}

// Revert commits the inverse of the commit ref names onto branch: a
// three-way merge whose base is that commit and whose source is its parent.
func (s *Store) Revert(ctx context.Context, branch, ref string, parentNumber int, opts *artifacts.CommitOptions) (artifacts.Commit, error) {
	if opts == nil {
		opts = &artifacts.CommitOptions{}
	}
	if parentNumber <= 0 {
		parentNumber = 1
	}
	return s.updateThreeWay(ctx, "revert "+ref+" on "+branch, branch, func(tx *bolt.Tx, head artifacts.Commit) (threeWayCommit, error) {
		target, err := resolve(tx, ref)
		if err != nil {
			return threeWayCommit{}, err
		}
		if parentNumber > len(target.commit.Parents) {
			return threeWayCommit{}, fmt.Errorf("%w: commit %s has %d parent(s); cannot revert against parent %d", artifacts.ErrInvalid, short(target.commit.ID), len(target.commit.Parents), parentNumber)
		}
		parent, err := getCommit(tx, target.commit.Parents[parentNumber-1])
		if err != nil {
			return threeWayCommit{}, err
		}
		return threeWayCommit{
			base: target.commit.MetaRangeID, source: parent.MetaRangeID,
			conflictSource: "revert " + short(target.commit.ID), allowEmpty: opts.AllowEmpty,
			noChanges: fmt.Sprintf("reverting %s changes nothing on %s", short(target.commit.ID), branch),
			parents:   []string{head.ID},
			message:   "Revert " + target.commit.ID, committer: opts.Committer, date: opts.Date, meta: opts.Metadata,
		}, nil
	})
}
