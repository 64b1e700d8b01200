package storeserver

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/internal/lakefsapi"
)

// createRepository answers POST /repositories. The server serves one
// store, which exists: creating it again is a conflict, creating another
// is not supported.
func (s *Server) createRepository(c *call) error {
	var body lakefsapi.RepositoryCreation
	if err := decodeJSON(c.r, s.opts.MaxJSONBytes, &body, false); err != nil {
		return err
	}
	if body.Name == s.repo {
		return errorf(http.StatusConflict, "repository exists: %q is the repository this server serves; open it as lakefs://%s", s.repo, s.repo)
	}
	return errorf(http.StatusNotImplemented, "not supported: this server serves one repository, %q, and cannot create %q; open lakefs://%s, or run `rlpipe store serve` on another store", s.repo, body.Name, s.repo)
}

// getRepository answers GET /repositories/{repository}.
func (s *Server) getRepository(c *call) error {
	info, err := s.st.Repository(c.ctx())
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, fromRepository(s.repo, info))
	return nil
}

// deleteRepository answers DELETE /repositories/{repository}: not over
// the API.
func (s *Server) deleteRepository(c *call) error {
	return errorf(http.StatusNotImplemented, "not supported: the store server does not delete the repository it serves; stop it and remove the store instead")
}

func (s *Server) listBranches(c *call) error {
	return writeRefs(c, s.st.ListBranches, func(b artifacts.Branch) lakefsapi.Ref { return lakefsapi.Ref{ID: b.Name, CommitID: b.CommitID} })
}

// writeRefs answers a listing of branches or tags: a page of refs in
// name order after the query's after, of its amount.
func writeRefs[T any](c *call, list func(context.Context) iter.Seq2[T, error], ref func(T) lakefsapi.Ref) error {
	amount, err := c.amount()
	if err != nil {
		return err
	}
	return writePage(c, list(c.ctx()), func(r T) string { return ref(r).ID }, ref, c.q.Get("after"), amount)
}

// nameClash is the answer to creating a ref under a name that a ref of
// the other kind holds (the store's ErrTagExists from CreateBranch, its
// ErrBranchExists from CreateTag): 409 in lakeFS's own words, "tag ID X:
// conflict found" or "branch name X: conflict found", which the lakefs://
// backend reads as that clash and explains itself. The store's words are
// left out: after lakeFS's they would only say it again.
func nameClash(holder, name string) error {
	return errorf(http.StatusConflict, "%s %s: conflict found", holder, name)
}

// createRef creates ref name at target with create; a refusal because a
// ref of the other kind holds the name (clash) is answered as nameClash
// with holder, lakeFS's words for that kind.
func createRef[T any](c *call, create func(context.Context, string, string) (T, error), name, target string, clash error, holder string) (T, error) {
	r, err := create(c.ctx(), name, target)
	if errors.Is(err, clash) {
		return r, nameClash(holder, name)
	}
	return r, err
}

// createBranch answers POST …/branches with the new branch's commit id
// as text, as lakeFS does.
func (s *Server) createBranch(c *call) error {
	var body lakefsapi.BranchCreation
	if err := decodeJSON(c.r, s.opts.MaxJSONBytes, &body, false); err != nil {
		return err
	}
	if err := artifacts.ValidateBranchName(body.Name); err != nil {
		return errorf(http.StatusBadRequest, "invalid branch name %q: use letters, digits, '_' and '-', starting with a letter, digit or '_'", body.Name)
	}
	if body.Source == "" {
		return errorf(http.StatusBadRequest, "create branch %q: the body names no source (a branch, tag or commit)", body.Name)
	}
	b, err := createRef(c, s.st.CreateBranch, body.Name, body.Source, artifacts.ErrTagExists, "tag ID")
	if err != nil {
		return err
	}
	c.w.Header().Set("Content-Type", "text/html; charset=utf-8")
	c.w.Header().Set("X-Content-Type-Options", "nosniff")
	c.w.WriteHeader(http.StatusCreated)
	_, _ = c.w.Write([]byte(b.CommitID))
	return nil
}

func (s *Server) getBranch(c *call) error {
	name, err := c.branch("branch")
	if err != nil {
		return err
	}
	b, err := s.st.GetBranch(c.ctx(), name)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, lakefsapi.Ref{ID: b.Name, CommitID: b.CommitID})
	return nil
}

func (s *Server) deleteBranch(c *call) error {
	name, err := c.branch("branch")
	if err != nil {
		return err
	}
	if err := s.st.DeleteBranch(c.ctx(), name); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// resetBranch answers PUT …/branches/{branch}: discard staged changes,
// all of them (type reset) or under a prefix (type common_prefix).
func (s *Server) resetBranch(c *call) error {
	name, body, err := branchBody[lakefsapi.ResetCreation](s, c)
	if err != nil {
		return err
	}
	prefix := ""
	switch body.Type {
	case "reset":
	case "common_prefix":
		if body.Path == "" {
			return errorf(http.StatusBadRequest, "reset branch %q: type common_prefix needs a path (the prefix to reset)", name)
		}
		prefix = body.Path
	case "object":
		return errorf(http.StatusNotImplemented, "not supported: reset branch %q: the store resets by prefix only; send type common_prefix with path %q, or type reset", name, body.Path)
	default:
		return errorf(http.StatusBadRequest, "reset branch %q: type %q: want reset or common_prefix", name, body.Type)
	}
	if err := s.st.ResetBranch(c.ctx(), name, prefix); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listTags(c *call) error {
	return writeRefs(c, s.st.ListTags, func(t artifacts.Tag) lakefsapi.Ref { return lakefsapi.Ref{ID: t.Name, CommitID: t.CommitID} })
}

func (s *Server) createTag(c *call) error {
	var body lakefsapi.TagCreation
	if err := decodeJSON(c.r, s.opts.MaxJSONBytes, &body, false); err != nil {
		return err
	}
	if err := artifacts.ValidateTagName(body.ID); err != nil {
		return err
	}
	if body.Ref == "" {
		return errorf(http.StatusBadRequest, "create tag %q: the body names no ref to tag", body.ID)
	}
	t, err := createRef(c, s.st.CreateTag, body.ID, body.Ref, artifacts.ErrBranchExists, "branch name")
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusCreated, lakefsapi.Ref{ID: t.Name, CommitID: t.CommitID})
	return nil
}

func (s *Server) getTag(c *call) error {
	t, err := s.st.GetTag(c.ctx(), c.p["tag"])
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, lakefsapi.Ref{ID: t.Name, CommitID: t.CommitID})
	return nil
}

func (s *Server) deleteTag(c *call) error {
	if err := s.st.DeleteTag(c.ctx(), c.p["tag"]); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// getCommit answers GET …/commits/{commitId}. As on lakeFS, any ref
// expression is accepted (a branch, a tag, a prefix, main~2).
func (s *Server) getCommit(c *call) error {
	cm, err := s.st.ResolveRef(c.ctx(), c.p["commitId"])
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, fromCommit(cm))
	return nil
}

func (s *Server) commit(c *call) error {
	branch, body, err := branchBody[lakefsapi.CommitCreation](s, c)
	if err != nil {
		return err
	}
	opts := &artifacts.CommitOptions{Metadata: body.Metadata, AllowEmpty: body.AllowEmpty}
	if body.Date != nil {
		opts.Date = time.Unix(*body.Date, 0).UTC()
	}
	if s.opts.Faults.CommitWindow > 0 {
		done, err := s.openCommitWindow(c, branch)
		if err != nil {
			return err
		}
		defer done()
	}
	cm, err := s.st.Commit(c.ctx(), branch, body.Message, opts)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusCreated, fromCommit(cm))
	return nil
}

// logCommits answers GET …/refs/{ref}/commits: history newest first,
// filtered by objects and prefixes, paged by commit id (after). With
// limit=true one page of amount is all there is.
func (s *Server) logCommits(c *call) error {
	amount, err := c.amount()
	if err != nil {
		return err
	}
	firstParent, err := c.boolean("first_parent", false)
	if err != nil {
		return err
	}
	limit, err := c.boolean("limit", false)
	if err != nil {
		return err
	}
	opts := &artifacts.LogOptions{FirstParent: firstParent, Paths: c.q["objects"], Prefixes: c.q["prefixes"]}
	after := c.q.Get("after")
	skipping := after != ""
	out := make([]lakefsapi.Commit, 0, min(amount, 64))
	more := false
	for cm, err := range s.st.Log(c.ctx(), c.p["ref"], opts) {
		if err != nil {
			return err
		}
		if skipping {
			skipping = cm.ID != after
			continue
		}
		if len(out) == amount {
			more = !limit
			break
		}
		out = append(out, fromCommit(cm))
	}
	last := ""
	if len(out) > 0 {
		last = out[len(out)-1].ID
	}
	return writeResults(c, out, more, last)
}
