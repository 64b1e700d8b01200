package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/rlpipe/rlpipe/artifacts"
)

// view is what a ref resolves to: a commit, and for a bare branch name the
// branch whose staged changes overlay it.
type view struct {
	commit artifacts.Commit
	branch string // "" unless staged changes are visible
}

// commitID hashes a commit's content (everything but the id). It fails
// on a commit JSON cannot hold, such as a date after the year 9999.
func commitID(c artifacts.Commit) (string, error) {
	c.ID = ""
	c.CreationDate = c.CreationDate.UTC()
	data, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("commit id: encode the commit: %w", err)
	}
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:]), nil
}

func getCommit(tx *bolt.Tx, id string) (artifacts.Commit, error) {
	var c artifacts.Commit
	ok, err := getJSON(tx.Bucket(bucketCommits), []byte(id), &c)
	if err != nil {
		return c, fmt.Errorf("read commit %s: %w", id, err)
	}
	if !ok {
		return c, fmt.Errorf("commit %s: %w", id, artifacts.ErrCommitNotFound)
	}
	return c, nil
}

// branchHead returns the commit a branch points at.
func branchHead(tx *bolt.Tx, name string) (artifacts.Commit, error) {
	b, err := getBranch(tx, name)
	if err != nil {
		return artifacts.Commit{}, err
	}
	return getCommit(tx, b.CommitID)
}

func getBranch(tx *bolt.Tx, name string) (artifacts.Branch, error) {
	var b artifacts.Branch
	ok, err := getJSON(tx.Bucket(bucketBranches), []byte(name), &b)
	if err != nil {
		return b, err
	}
	if !ok {
		return b, fmt.Errorf("branch %q: %w", name, artifacts.ErrBranchNotFound)
	}
	return b, nil
}

// resolve turns a ref expression into a view. A name is looked up as a
// branch, then a tag, then a commit id or prefix. New branches and tags
// never share a name (see nameTaken); a store written before that rule
// may hold both, and then the branch wins, as on lakeFS.
func resolve(tx *bolt.Tx, ref string) (view, error) {
	e, err := artifacts.ParseRef(ref)
	if err != nil {
		return view{}, err
	}
	var id string
	var br string
	if b, err := getBranch(tx, e.Base); err == nil {
		id, br = b.CommitID, b.Name
	} else if t := tx.Bucket(bucketTags).Get([]byte(e.Base)); t != nil {
		id = string(t)
	} else if id, err = commitByPrefix(tx, e.Base); err != nil {
		return view{}, fmt.Errorf("resolve %q: %w", ref, err)
	}
	c, err := getCommit(tx, id)
	if err != nil {
		return view{}, err
	}
	for _, op := range e.Ops {
		switch {
		case op.Kind == '^' && op.N == 0:
		case op.Kind == '^':
			if op.N > len(c.Parents) {
				return view{}, fmt.Errorf("resolve %q: %w: commit %s has %d parent(s), not %d", ref, artifacts.ErrRefNotFound, short(c.ID), len(c.Parents), op.N)
			}
			if c, err = getCommit(tx, c.Parents[op.N-1]); err != nil {
				return view{}, err
			}
		default: // '~'
			for i := 0; i < op.N; i++ {
				if len(c.Parents) == 0 {
					return view{}, fmt.Errorf("resolve %q: %w: commit %s has no parent (history is shorter than ~%d)", ref, artifacts.ErrRefNotFound, short(c.ID), op.N)
				}
				if c, err = getCommit(tx, c.Parents[0]); err != nil {
					return view{}, err
				}
			}
		}
	}
	v := view{commit: c}
	if br != "" && len(e.Ops) == 0 && !e.CommittedOnly {
		v.branch = br
	}
	return v, nil
}

func commitByPrefix(tx *bolt.Tx, prefix string) (string, error) {
	if strings.Trim(prefix, "0123456789abcdef") != "" {
		return "", fmt.Errorf("%w: no branch, tag or commit named %q", artifacts.ErrRefNotFound, prefix)
	}
	c := tx.Bucket(bucketCommits).Cursor()
	var found []string
	for k, _ := c.Seek([]byte(prefix)); k != nil && strings.HasPrefix(string(k), prefix); k, _ = c.Next() {
		found = append(found, string(k))
		if len(found) > 3 {
			break
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%w: no branch, tag or commit named %q", artifacts.ErrRefNotFound, prefix)
	case 1:
		return found[0], nil
	}
	shown := make([]string, 0, 3)
	for _, f := range found[:min(3, len(found))] {
		shown = append(shown, short(f))
	}
	return "", fmt.Errorf("%w: commit prefix %q matches %s…: use more digits", artifacts.ErrAmbiguousRef, prefix, strings.Join(shown, ", "))
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// ResolveRef returns the commit a ref names.
func (s *Store) ResolveRef(ctx context.Context, ref string) (artifacts.Commit, error) {
	v, err := viewGet(s, ctx, func(tx *bolt.Tx) (view, error) { return resolve(tx, ref) })
	return v.commit, err
}

// GetCommit returns a commit by its full id.
func (s *Store) GetCommit(ctx context.Context, id string) (artifacts.Commit, error) {
	return viewGet(s, ctx, func(tx *bolt.Tx) (artifacts.Commit, error) { return getCommit(tx, id) })
}

// clashError is the refusal of a ref whose name another kind of ref
// holds. It matches that kind's exists error (ErrBranchExists when a
// branch holds the name), and so ErrExists.
type clashError struct {
	msg  string
	kind error
}

func (e *clashError) Error() string { return e.msg }
func (e *clashError) Unwrap() error { return e.kind }

// nameTaken refuses creating a ref of kind creating named name because a
// ref of kind holder has that name. lakeFS refuses the same (409), so
// that a name always means one ref and resolving it never has to choose.
func nameTaken(creating, holder, name string) error {
	kind := artifacts.ErrBranchExists
	if holder == "tag" {
		kind = artifacts.ErrTagExists
	}
	return &clashError{
		msg:  fmt.Sprintf("create %s %q: a %s named %q exists; refs name one or the other (pick another name, or delete the %s first)", creating, name, holder, name, holder),
		kind: kind,
	}
}

// newRefTarget checks that a new ref of kind ("branch" or "tag") may
// take name — exists when a ref of its own kind holds it, a clash error
// when the other kind does — and returns the commit id ref resolves to.
func newRefTarget(tx *bolt.Tx, kind, name, ref string, exists error) (string, error) {
	own, other, otherKind := bucketBranches, bucketTags, "tag"
	if kind == "tag" {
		own, other, otherKind = bucketTags, bucketBranches, "branch"
	}
	if tx.Bucket(own).Get([]byte(name)) != nil {
		return "", exists
	}
	if tx.Bucket(other).Get([]byte(name)) != nil {
		return "", nameTaken(kind, otherKind, name)
	}
	v, err := resolve(tx, ref)
	if err != nil {
		return "", fmt.Errorf("create %s %q: %w", kind, name, err)
	}
	return v.commit.ID, nil
}

// CreateBranch points a new branch at the commit from resolves to. A
// name a tag holds is refused with ErrTagExists.
func (s *Store) CreateBranch(ctx context.Context, name, from string) (artifacts.Branch, error) {
	if err := artifacts.ValidateBranchName(name); err != nil {
		return artifacts.Branch{}, fmt.Errorf("create branch: %w", err)
	}
	var b artifacts.Branch
	err := s.update(ctx, func(tx *bolt.Tx) error {
		id, err := newRefTarget(tx, "branch", name, from,
			fmt.Errorf("create branch %q: %w (delete it first, or pick another name)", name, artifacts.ErrBranchExists))
		if err != nil {
			return err
		}
		b = artifacts.Branch{Name: name, CommitID: id}
		return putJSON(tx.Bucket(bucketBranches), []byte(name), b)
	})
	return b, err
}

// GetBranch returns a branch.
func (s *Store) GetBranch(ctx context.Context, name string) (artifacts.Branch, error) {
	return viewGet(s, ctx, func(tx *bolt.Tx) (artifacts.Branch, error) { return getBranch(tx, name) })
}

// ListBranches lists branches in name order.
func (s *Store) ListBranches(ctx context.Context) iter.Seq2[artifacts.Branch, error] {
	return listBucket(s, ctx, bucketBranches, func(_, v []byte) (artifacts.Branch, error) {
		var b artifacts.Branch
		err := json.Unmarshal(v, &b)
		return b, err
	})
}

// DeleteBranch deletes a branch and its staged changes.
func (s *Store) DeleteBranch(ctx context.Context, name string) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		if _, err := getBranch(tx, name); err != nil {
			return fmt.Errorf("delete branch: %w", err)
		}
		info, err := repoInfo(tx)
		if err != nil {
			return err
		}
		if name == info.DefaultBranch {
			return fmt.Errorf("delete branch %q: %w: it is the repository's default branch", name, artifacts.ErrProtected)
		}
		if err := tx.Bucket(bucketBranches).Delete([]byte(name)); err != nil {
			return err
		}
		st := tx.Bucket(bucketStaging)
		if st.Bucket([]byte(name)) != nil {
			return st.DeleteBucket([]byte(name))
		}
		return nil
	})
}

// CreateTag points a new tag at the commit ref resolves to. A name a
// branch holds is refused with ErrBranchExists.
func (s *Store) CreateTag(ctx context.Context, name, ref string) (artifacts.Tag, error) {
	if err := artifacts.ValidateTagName(name); err != nil {
		return artifacts.Tag{}, fmt.Errorf("create tag: %w", err)
	}
	var t artifacts.Tag
	err := s.update(ctx, func(tx *bolt.Tx) error {
		id, err := newRefTarget(tx, "tag", name, ref, fmt.Errorf("create tag %q: %w", name, artifacts.ErrTagExists))
		if err != nil {
			return err
		}
		t = artifacts.Tag{Name: name, CommitID: id}
		return tx.Bucket(bucketTags).Put([]byte(name), []byte(id))
	})
	return t, err
}

// GetTag returns a tag.
func (s *Store) GetTag(ctx context.Context, name string) (artifacts.Tag, error) {
	var t artifacts.Tag
	err := s.view(ctx, func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketTags).Get([]byte(name))
		if id == nil {
			return fmt.Errorf("tag %q: %w", name, artifacts.ErrTagNotFound)
		}
		t = artifacts.Tag{Name: name, CommitID: string(id)}
		return nil
	})
	return t, err
}

// ListTags lists tags in name order.
func (s *Store) ListTags(ctx context.Context) iter.Seq2[artifacts.Tag, error] {
	return listBucket(s, ctx, bucketTags, func(k, v []byte) (artifacts.Tag, error) {
		return artifacts.Tag{Name: string(k), CommitID: string(v)}, nil
	})
}

// listBucket reads every entry of a bucket in key order in one read
// transaction, decoding each with decode, and then yields them: the
// transaction is closed before the caller sees the first one. A read or
// decode error is yielded alone.
func listBucket[T any](s *Store, ctx context.Context, bucket []byte, decode func(k, v []byte) (T, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var all []T
		err := s.view(ctx, func(tx *bolt.Tx) error {
			return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
				e, err := decode(k, v)
				if err != nil {
					return err
				}
				all = append(all, e)
				return nil
			})
		})
		yieldAll(yield, all, err)
	}
}

// yieldAll yields err alone when it is not nil, else each of all until
// the caller stops: how a listing read whole in one transaction is
// handed out after the transaction has closed.
func yieldAll[T any](yield func(T, error) bool, all []T, err error) {
	if err != nil {
		var zero T
		yield(zero, err)
		return
	}
	for _, e := range all {
		if !yield(e, nil) {
			return
		}
	}
}

// DeleteTag deletes a tag.
func (s *Store) DeleteTag(ctx context.Context, name string) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		if tx.Bucket(bucketTags).Get([]byte(name)) == nil {
			return fmt.Errorf("delete tag %q: %w", name, artifacts.ErrTagNotFound)
		}
		return tx.Bucket(bucketTags).Delete([]byte(name))
	})
}

// headCache keeps the view of each branch head that reads resolved last,
// with the raw records it was decoded from: a read of a branch whose
// branch and commit records are byte-for-byte the same reuses it instead
// of decoding both again (cache lookups read one branch thousands of
// times between two of its commits).
type headCache struct {
	mu    sync.Mutex
	heads map[string]cachedHead
}

type cachedHead struct {
	branch, commit []byte // raw records
	v              view
}

// resolveHead is resolve for reads: a plain branch name is served from
// the head cache when its records are unchanged. The view it returns is
// shared: its commit must not be modified.
func (s *Store) resolveHead(tx *bolt.Tx, ref string) (view, error) {
	if artifacts.ValidateBranchName(ref) != nil {
		return resolve(tx, ref)
	}
	rawBranch := tx.Bucket(bucketBranches).Get([]byte(ref))
	if rawBranch == nil {
		return resolve(tx, ref) // a tag or a commit
	}
	h := &s.heads
	h.mu.Lock()
	c, ok := h.heads[ref]
	h.mu.Unlock()
	if ok && bytes.Equal(c.branch, rawBranch) && bytes.Equal(c.commit, tx.Bucket(bucketCommits).Get([]byte(c.v.commit.ID))) {
		return c.v, nil
	}
	v, err := resolve(tx, ref)
	if err != nil {
		return v, err
	}
	c = cachedHead{branch: bytes.Clone(rawBranch), commit: bytes.Clone(tx.Bucket(bucketCommits).Get([]byte(v.commit.ID))), v: v}
	h.mu.Lock()
	if h.heads == nil || len(h.heads) > 1024 {
		h.heads = map[string]cachedHead{}
	}
	h.heads[ref] = c
	h.mu.Unlock()
	return v, nil
}
