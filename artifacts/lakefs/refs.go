package lakefs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/internal/lakefsapi"
)

// checkBranch validates a name that must be a branch. A well-formed ref
// expression that cannot name a branch ("main~1", "main@") is
// ErrReadOnlyRef rather than a bad name.
func checkBranch(name string) error {
	err := artifacts.ValidateBranchName(name)
	if err == nil {
		return nil
	}
	if _, perr := artifacts.ParseRef(name); perr == nil {
		return fmt.Errorf("%w: %q: writes go to a branch", artifacts.ErrReadOnlyRef, name)
	}
	return err
}

// refArg validates a ref expression and returns it in the form sent to
// the server, which resolves ~N, ^N and @ itself. lakeFS takes '@' only
// as a ref's sole modifier ("main@"); followed by ~N or ^N it changes
// nothing (ancestors are commits either way), so it is dropped there.
func refArg(ref string) (string, error) {
	e, err := artifacts.ParseRef(ref)
	if err != nil {
		return "", err
	}
	if len(e.Ops) > 0 {
		e.CommittedOnly = false
	}
	return e.String(), nil
}

// onWrite refines an error from a write to branch: lakeFS reports a write
// to a tag or a commit as a missing branch, the contract as ErrReadOnlyRef.
func (s *Store) onWrite(ctx context.Context, branch string, err error) error {
	if !errors.Is(err, artifacts.ErrBranchNotFound) {
		return err
	}
	if _, rerr := s.ResolveRef(ctx, branch); rerr == nil {
		return fmt.Errorf("%w: %q is a tag or a commit, not a branch: %v", artifacts.ErrReadOnlyRef, branch, err)
	}
	return err
}

// newRefArg checks a new ref's name with check and returns the API's
// form of the ref it will point at; what names the operation in errors.
func newRefArg(what, name, ref string, check func(string) error) (string, error) {
	if err := check(name); err != nil {
		return "", fmt.Errorf("lakefs: %s: %w", what, err)
	}
	r, err := refArg(ref)
	if err != nil {
		return "", fmt.Errorf("lakefs: %s: %w", what, err)
	}
	return r, nil
}

// CreateBranch creates branch name at the commit from resolves to. A
// name a tag holds is refused by lakeFS, and reported as ErrTagExists.
func (s *Store) CreateBranch(ctx context.Context, name, from string) (artifacts.Branch, error) {
	what := fmt.Sprintf("create branch %q from %q", name, from)
	src, err := newRefArg(what, name, from, artifacts.ValidateBranchName)
	if err != nil {
		return artifacts.Branch{}, err
	}
	// The answer is the new branch's commit id as text, not JSON.
	req, err := jsonRequest(http.MethodPost, s.repoPath("branches"), lakefsapi.BranchCreation{Name: name, Source: src})
	if err != nil {
		return artifacts.Branch{}, fmt.Errorf("lakefs: %s: %w", what, err)
	}
	resp, err := s.c.do(ctx, req)
	if err != nil {
		return artifacts.Branch{}, s.c.translate(err, kinds{notFound: artifacts.ErrRefNotFound, conflict: artifacts.ErrBranchExists, clash: &nameClash{holder: "tag", name: name}}, what)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	drain(resp.Body)
	if id := strings.TrimSpace(string(b)); artifacts.IsCommitID(id) {
		return artifacts.Branch{Name: name, CommitID: id}, nil
	}
	return s.GetBranch(ctx, name)
}

// GetBranch returns the branch and its head commit.
func (s *Store) GetBranch(ctx context.Context, name string) (artifacts.Branch, error) {
	return getRef(s, ctx, "branch", name, checkBranch, artifacts.ErrBranchNotFound, branchOf)
}

func branchOf(r lakefsapi.Ref) artifacts.Branch {
	return artifacts.Branch{Name: r.ID, CommitID: r.CommitID}
}

func tagOf(r lakefsapi.Ref) artifacts.Tag { return artifacts.Tag{Name: r.ID, CommitID: r.CommitID} }

// getRef reads one ref of kind ("branch" or "tag") after check accepts
// its name; a 404 is notFound.
func getRef[T any](s *Store, ctx context.Context, kind, name string, check func(string) error, notFound error, conv func(lakefsapi.Ref) T) (T, error) {
	var zero T
	what := fmt.Sprintf("get %s %q", kind, name)
	if err := check(name); err != nil {
		return zero, fmt.Errorf("lakefs: %s: %w", what, err)
	}
	var r lakefsapi.Ref
	if err := s.c.call(ctx, http.MethodGet, s.repoPath(refsPath(kind), name), nil, nil, &r); err != nil {
		return zero, s.c.translate(err, kinds{notFound: notFound}, what)
	}
	return conv(r), nil
}

// refsPath is the plural of a ref kind: the API's path segment of
// those refs, and the noun of a listing's error.
func refsPath(kind string) string {
	if kind == "branch" {
		return "branches"
	}
	return kind + "s"
}

// listRefs lists the refs of kind ("branch" or "tag") in name order.
func listRefs[T any](s *Store, ctx context.Context, kind string, conv func(lakefsapi.Ref) T) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for r, err := range paginate[lakefsapi.Ref](ctx, s.c, s.repoPath(refsPath(kind)), nil, maxPageSize) {
			if err != nil {
				var zero T
				yield(zero, s.c.translate(err, kinds{notFound: artifacts.ErrRepositoryNotFound}, "list "+refsPath(kind)))
				return
			}
			if !yield(conv(r), nil) {
				return
			}
		}
	}
}

// ListBranches lists branches in name order.
func (s *Store) ListBranches(ctx context.Context) iter.Seq2[artifacts.Branch, error] {
	return listRefs(s, ctx, "branch", branchOf)
}

// DeleteBranch deletes a branch and its staged changes. The repository's
// default branch is refused with ErrProtected before any request.
func (s *Store) DeleteBranch(ctx context.Context, name string) error {
	what := fmt.Sprintf("delete branch %q", name)
	if err := checkBranch(name); err != nil {
		return fmt.Errorf("lakefs: %s: %w", what, err)
	}
	if name == s.defaultBranch {
		return fmt.Errorf("lakefs: %s: %w: it is the repository's default branch", what, artifacts.ErrProtected)
	}
	err := s.c.call(ctx, http.MethodDelete, s.repoPath("branches", name), nil, nil, nil)
	return s.onWrite(ctx, name, s.c.translate(err, kinds{notFound: artifacts.ErrBranchNotFound}, what))
}

// ResetBranch discards staged changes under prefix ("" means all).
func (s *Store) ResetBranch(ctx context.Context, name, prefix string) error {
	what := fmt.Sprintf("reset branch %q", name)
	body := lakefsapi.ResetCreation{Type: "reset"}
	if prefix != "" {
		what = fmt.Sprintf("reset branch %q under %q", name, prefix)
		body = lakefsapi.ResetCreation{Type: "common_prefix", Path: prefix}
	}
	if err := checkBranch(name); err != nil {
		return fmt.Errorf("lakefs: %s: %w", what, err)
	}
	err := s.c.call(ctx, http.MethodPut, s.repoPath("branches", name), nil, body, nil)
	return s.onWrite(ctx, name, s.c.translate(err, kinds{notFound: artifacts.ErrBranchNotFound}, what))
}

// CreateTag points tag name at the commit ref resolves to. A name a
// branch holds is refused by lakeFS, and reported as ErrBranchExists
// with a message that names the branch.
func (s *Store) CreateTag(ctx context.Context, name, ref string) (artifacts.Tag, error) {
	what := fmt.Sprintf("create tag %q at %q", name, ref)
	target, err := newRefArg(what, name, ref, artifacts.ValidateTagName)
	if err != nil {
		return artifacts.Tag{}, err
	}
	var r lakefsapi.Ref
	err = s.c.call(ctx, http.MethodPost, s.repoPath("tags"), nil, lakefsapi.TagCreation{ID: name, Ref: target}, &r)
	if err != nil {
		return artifacts.Tag{}, s.c.translate(err, kinds{notFound: artifacts.ErrRefNotFound, conflict: artifacts.ErrTagExists, clash: &nameClash{holder: "branch", name: name}}, what)
	}
	return tagOf(r), nil
}

// GetTag returns a tag.
func (s *Store) GetTag(ctx context.Context, name string) (artifacts.Tag, error) {
	return getRef(s, ctx, "tag", name, artifacts.ValidateTagName, artifacts.ErrTagNotFound, tagOf)
}

// ListTags lists tags in name order.
func (s *Store) ListTags(ctx context.Context) iter.Seq2[artifacts.Tag, error] {
	return listRefs(s, ctx, "tag", tagOf)
}

// DeleteTag deletes a tag.
func (s *Store) DeleteTag(ctx context.Context, name string) error {
	what := fmt.Sprintf("delete tag %q", name)
	if err := artifacts.ValidateTagName(name); err != nil {
		return fmt.Errorf("lakefs: %s: %w", what, err)
	}
	err := s.c.call(ctx, http.MethodDelete, s.repoPath("tags", name), nil, nil, nil)
	return s.c.translate(err, kinds{notFound: artifacts.ErrTagNotFound}, what)
}

// ResolveRef returns the commit a ref expression names.
//
// It asks GET /commits/{ref}, which dereferences any ref expression
// (branch, tag, commit id or prefix, ~N, ^N, branch@). The commit log
// (GET /refs/{ref}/commits) is no substitute: lakeFS validates its ref as
// a branch name, so main~1, main@ or a tag v1.0 are refused there with 400.
func (s *Store) ResolveRef(ctx context.Context, ref string) (artifacts.Commit, error) {
	what := fmt.Sprintf("resolve ref %q", ref)
	arg, err := refArg(ref)
	if err != nil {
		return artifacts.Commit{}, fmt.Errorf("lakefs: %s: %w", what, err)
	}
	var c lakefsapi.Commit
	if err := s.c.call(ctx, http.MethodGet, s.repoPath("commits", arg), nil, nil, &c); err != nil {
		return artifacts.Commit{}, s.c.translate(err, kinds{notFound: artifacts.ErrRefNotFound, refLookup: true}, what)
	}
	if c.ID == "" {
		return artifacts.Commit{}, fmt.Errorf("lakefs: %s: %w: the server named no commit", what, artifacts.ErrRefNotFound)
	}
	return commitFromWire(c), nil
}

// logRef returns the form of a ref the commit log accepts. lakeFS
// validates the log's ref as a branch name (letters, digits, '_' and '-')
// and only then dereferences it, so a branch, a tag whose name is a valid
// branch name or a commit id (or prefix) goes as it is, and anything else
// (main~1, main@, v1.0) is resolved to its commit id first.
func (s *Store) logRef(ctx context.Context, ref, arg string) (string, error) {
	if artifacts.ValidateBranchName(arg) == nil {
		return arg, nil
	}
	c, err := s.ResolveRef(ctx, ref)
	if err != nil {
		return "", err
	}
	return c.ID, nil
}

// GetCommit returns a commit by its full id. Anything else (a prefix, a
// branch) names no commit here; ResolveRef takes ref expressions.
func (s *Store) GetCommit(ctx context.Context, id string) (artifacts.Commit, error) {
	what := fmt.Sprintf("get commit %q", id)
	if !artifacts.IsCommitID(id) {
		return artifacts.Commit{}, fmt.Errorf("lakefs: %s: %w: not a full commit id (64 hex digits); use ResolveRef for ref expressions", what, artifacts.ErrCommitNotFound)
	}
	var c lakefsapi.Commit
	if err := s.c.call(ctx, http.MethodGet, s.repoPath("commits", id), nil, nil, &c); err != nil {
		return artifacts.Commit{}, s.c.translate(err, kinds{notFound: artifacts.ErrCommitNotFound}, what)
	}
	return commitFromWire(c), nil
}

// Commit records the branch's staged changes as a new commit. The
// committer is the server's user (opts.Committer is ignored); opts.Date,
// when set, is sent as the commit date.
func (s *Store) Commit(ctx context.Context, branch, message string, opts *artifacts.CommitOptions) (artifacts.Commit, error) {
	what := fmt.Sprintf("commit to branch %q", branch)
	if err := checkBranch(branch); err != nil {
		return artifacts.Commit{}, fmt.Errorf("lakefs: %s: %w", what, err)
	}
	body := lakefsapi.CommitCreation{Message: message}
	if opts != nil {
		body.Metadata = opts.Metadata
		body.AllowEmpty = opts.AllowEmpty
		if !opts.Date.IsZero() {
			d := opts.Date.Unix()
			body.Date = &d
		}
	}
	var c lakefsapi.Commit
	err := s.c.call(ctx, http.MethodPost, s.repoPath("branches", branch, "commits"), nil, body, &c)
	if err != nil {
		err = s.c.translate(err, kinds{notFound: artifacts.ErrBranchNotFound, conflict: artifacts.ErrConcurrentUpdate}, what)
		return artifacts.Commit{}, s.onWrite(ctx, branch, err)
	}
	return commitFromWire(c), nil
}

// Log walks history from ref, newest first.
func (s *Store) Log(ctx context.Context, ref string, opts *artifacts.LogOptions) iter.Seq2[artifacts.Commit, error] {
	return func(yield func(artifacts.Commit, error) bool) {
		what := fmt.Sprintf("log %q", ref)
		arg, err := refArg(ref)
		if err != nil {
			yield(artifacts.Commit{}, fmt.Errorf("lakefs: %s: %w", what, err))
			return
		}
		if arg, err = s.logRef(ctx, ref, arg); err != nil {
			yield(artifacts.Commit{}, err)
			return
		}
		o := artifacts.ValueOf(opts)
		q := url.Values{}
		if len(o.Paths) > 0 {
			q["objects"] = o.Paths
		}
		if len(o.Prefixes) > 0 {
			q["prefixes"] = o.Prefixes
		}
		if o.FirstParent {
			q.Set("first_parent", "true")
		}
		amount := maxPageSize
		if o.Limit > 0 && o.Limit <= maxPageSize {
			// One page holds everything asked for; tell the server not
			// to look further.
			amount = o.Limit
			q.Set("limit", "true")
		}
		yieldPages(ctx, s, s.repoPath("refs", arg, "commits"), q, amount, o.Limit, what, commitFromWire, yield)
	}
}
