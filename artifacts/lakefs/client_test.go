package lakefs

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
)

func TestNormalizeEndpoint(t *testing.T) {
	cases := []struct {
		in, want string
		bad      bool
	}{
		{in: "http://localhost:8000", want: "http://localhost:8000/api/v1"},
		{in: "http://localhost:8000/", want: "http://localhost:8000/api/v1"},
		{in: "http://localhost:8000/api/v1", want: "http://localhost:8000/api/v1"},
		{in: "http://localhost:8000/api/v1/", want: "http://localhost:8000/api/v1"},
		{in: "https://lakefs.example.com/prefix", want: "https://lakefs.example.com/prefix/api/v1"},
		{in: "", bad: true},
		{in: "localhost:8000", bad: true},
		{in: "ftp://host", bad: true},
		{in: "http://" + testKey + ":" + testSecret + "@host:8000", bad: true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := normalizeEndpoint(c.in)
			if c.bad {
				if !errors.Is(err, artifacts.ErrInvalid) {
					t.Fatalf("got %q, %v; want ErrInvalid", got, err)
				}
				if strings.Contains(err.Error(), testSecret) {
					t.Fatalf("error shows the secret: %v", err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestParseURI(t *testing.T) {
	for uri, want := range map[string]string{"lakefs://my-repo": "my-repo", "lakefs://my-repo/": "my-repo"} {
		if got, err := ParseURI(uri); err != nil || got != want {
			t.Errorf("ParseURI(%q) = %q, %v; want %q", uri, got, err, want)
		}
	}
	for _, uri := range []string{"lakefs://", "lakefs://My_Repo", "lakefs://repo/main", "s3://repo", "repo"} {
		if _, err := ParseURI(uri); !errors.Is(err, artifacts.ErrInvalid) {
			t.Errorf("ParseURI(%q): got %v, want ErrInvalid", uri, err)
		}
	}
}

// TestErrorMapping checks the translation of every status the server
// answers with into the contract's named errors.
func TestErrorMapping(t *testing.T) {
	ctx := t.Context()
	call := map[string]func(s *Store) error{
		"get branch": func(s *Store) error { _, err := s.GetBranch(ctx, "dev"); return err },
		"create branch": func(s *Store) error {
			_, err := s.CreateBranch(ctx, "dev", "main")
			return err
		},
		"delete branch": func(s *Store) error { return s.DeleteBranch(ctx, "dev") },
		"create tag":    func(s *Store) error { _, err := s.CreateTag(ctx, "v1", "main"); return err },
		"get tag":       func(s *Store) error { _, err := s.GetTag(ctx, "v1"); return err },
		"resolve":       func(s *Store) error { _, err := s.ResolveRef(ctx, "main~1"); return err },
		"get commit":    func(s *Store) error { _, err := s.GetCommit(ctx, cid("a1")); return err },
		"commit":        func(s *Store) error { _, err := s.Commit(ctx, "main", "m", nil); return err },
		"stat":          func(s *Store) error { _, err := s.StatObject(ctx, "main", "a/b"); return err },
		"get":           func(s *Store) error { _, _, err := s.GetObject(ctx, "main", "a/b"); return err },
		"put if absent": func(s *Store) error {
			_, err := s.PutObject(ctx, "main", "a/b", strings.NewReader("x"), &artifacts.PutOptions{IfAbsent: true})
			return err
		},
		"merge": func(s *Store) error { _, err := s.Merge(ctx, "dev", "main", nil); return err },
		"revert": func(s *Store) error {
			_, err := s.Revert(ctx, "main", "main", 0, nil)
			return err
		},
		"list": func(s *Store) error {
			for _, err := range s.ListObjects(ctx, "main", nil) {
				return err
			}
			return nil
		},
		"open": func(s *Store) error { _, err := s.Repository(ctx); return err },
	}
	cases := []struct {
		op      string
		status  int
		message string
		want    error
	}{
		{"get branch", 401, "error authenticating request", artifacts.ErrUnauthorized},
		{"commit", 403, "forbidden", artifacts.ErrUnauthorized},
		{"get branch", 404, "branch not found", artifacts.ErrBranchNotFound},
		{"get branch", 404, "not found", artifacts.ErrBranchNotFound},
		{"delete branch", 404, "not found", artifacts.ErrBranchNotFound},
		{"get tag", 404, "tag not found", artifacts.ErrTagNotFound},
		{"get commit", 404, "commit not found", artifacts.ErrCommitNotFound},
		{"resolve", 404, "not found", artifacts.ErrRefNotFound},
		{"resolve", 404, "reference is ambiguous: not found", artifacts.ErrAmbiguousRef},
		{"resolve", 400, "ref: invalid value: validation error", artifacts.ErrInvalidRef},
		{"stat", 404, "not found", artifacts.ErrObjectNotFound},
		{"stat", 404, "repository not found", artifacts.ErrRepositoryNotFound},
		{"get", 404, "not found", artifacts.ErrObjectNotFound},
		{"list", 404, "not found", artifacts.ErrRefNotFound},
		{"open", 404, "repository not found", artifacts.ErrRepositoryNotFound},
		{"create branch", 404, "not found", artifacts.ErrRefNotFound},
		{"create branch", 409, "branch already exists: not unique", artifacts.ErrBranchExists},
		{"create tag", 409, "tag already exists: not unique", artifacts.ErrTagExists},
		// lakeFS refuses a tag named like a branch and the reverse.
		{"create tag", 409, "branch name v1: conflict found", artifacts.ErrBranchExists},
		{"create branch", 409, "tag ID dev: conflict found", artifacts.ErrTagExists},
		{"put if absent", 412, "path already exists", artifacts.ErrObjectExists},
		{"put if absent", 404, "branch 'main' not found", artifacts.ErrBranchNotFound},
		{"commit", 400, "commit: no changes", artifacts.ErrNoChanges},
		{"commit", 423, "Too many attempts, try again later", artifacts.ErrConcurrentUpdate},
		{"commit", 500, "branch is currently locked, try again later", artifacts.ErrConcurrentUpdate},
		// lakeFS 1.x answers graveler.ErrTooManyTries with 429, and lets a
		// lost compare-and-swap on the branch (kv.ErrPredicateFailed) out as 500.
		{"commit", 429, "Too many attempts, try again later", artifacts.ErrConcurrentUpdate},
		{"commit", 500, "predicate failed", artifacts.ErrConcurrentUpdate},
		{"commit", 403, "cannot commit to protected branch", artifacts.ErrProtected},
		{"delete branch", 403, "cannot delete repository default branch", artifacts.ErrProtected},
		{"stat", 500, "User does not have the required permissions", artifacts.ErrUnauthorized},
		// GET /commits/{ref} maps only "not found"; a ^N past the parents is a 500.
		{"resolve", 500, "ref: invalid value: validation error", artifacts.ErrInvalidRef},
		{"resolve", 404, "commit not found", artifacts.ErrRefNotFound},
		{"commit", 412, "pre-commit hook aborted", artifacts.ErrConflict},
		{"merge", 400, "uncommitted changes (dirty branch)", artifacts.ErrDirtyBranch},
		{"merge", 409, "main: uncommitted changes (dirty branch)", artifacts.ErrDirtyBranch},
		{"merge", 400, "no changes", artifacts.ErrNoChanges},
		{"revert", 400, "main: uncommitted changes (dirty branch)", artifacts.ErrDirtyBranch},
		{"revert", 409, "conflict found", artifacts.ErrConflict},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%d/%s", c.op, c.status, c.message), func(t *testing.T) {
			s := newStub(t)
			s.handle("/", func(w http.ResponseWriter, r *http.Request) {
				writeError(w, c.status, c.message)
			})
			err := call[c.op](s.store())
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.message) {
				t.Fatalf("error %q does not carry the server's message %q", err, c.message)
			}
			if !strings.HasPrefix(err.Error(), "lakefs: ") {
				t.Fatalf("error %q does not say where it comes from", err)
			}
		})
	}

	t.Run("message", func(t *testing.T) {
		s := newStub(t)
		s.handle("POST /repositories/{repo}/branches", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusConflict, "branch already exists: not unique")
		})
		_, err := s.store().CreateBranch(ctx, "x", "main")
		want := `lakefs: create branch "x" from "main": branch exists: branch already exists: not unique`
		if err == nil || err.Error() != want {
			t.Fatalf("got %v, want %s", err, want)
		}
	})

	t.Run("name clash", func(t *testing.T) {
		s := newStub(t)
		s.handle("POST /repositories/{repo}/tags", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusConflict, "branch name dirty: conflict found")
		})
		s.handle("POST /repositories/{repo}/branches", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusConflict, "tag ID v1: conflict found")
		})
		// A tag named "dirty" must not read as a dirty branch.
		_, err := s.store().CreateTag(ctx, "dirty", "main")
		want := `lakefs: create tag "dirty" at "main": branch exists: a branch named "dirty" exists; refs name one or the other (server: branch name dirty: conflict found)`
		if !errors.Is(err, artifacts.ErrBranchExists) || errors.Is(err, artifacts.ErrTagExists) || err.Error() != want {
			t.Fatalf("create tag: got %v, want %s", err, want)
		}
		_, err = s.store().CreateBranch(ctx, "v1", "main")
		want = `lakefs: create branch "v1" from "main": tag exists: a tag named "v1" exists; refs name one or the other (server: tag ID v1: conflict found)`
		if !errors.Is(err, artifacts.ErrTagExists) || errors.Is(err, artifacts.ErrBranchExists) || err.Error() != want {
			t.Fatalf("create branch: got %v, want %s", err, want)
		}
	})

	t.Run("unnamed status", func(t *testing.T) {
		s := newStub(t)
		s.handle("/", func(w http.ResponseWriter, r *http.Request) { writeError(w, 500, "boom") })
		_, err := s.store().GetBranch(ctx, "dev")
		if err == nil || !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("got %v, want the status and the message", err)
		}
		for _, named := range []error{artifacts.ErrNotFound, artifacts.ErrConflict, artifacts.ErrInvalid, artifacts.ErrUnauthorized} {
			if errors.Is(err, named) {
				t.Fatalf("a 500 became %v", named)
			}
		}
	})

	t.Run("plain text body", func(t *testing.T) {
		s := newStub(t)
		s.handle("/", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "upstream down", 502) })
		_, err := s.store().GetBranch(ctx, "dev")
		if err == nil || !strings.Contains(err.Error(), "upstream down") {
			t.Fatalf("got %v, want the text body", err)
		}
	})
}

// TestWriteToNonBranch checks that lakeFS's "branch not found" for a write
// to a tag becomes ErrReadOnlyRef.
func TestWriteToNonBranch(t *testing.T) {
	s := newStub(t)
	s.handle("POST /repositories/{repo}/branches/{branch}/objects", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, 404, "branch 'v1' not found")
	})
	s.handle("GET /repositories/{repo}/commits/{ref}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("ref") != "v1" {
			writeError(w, 404, "commit not found")
			return
		}
		writeJSON(w, 200, commitJSON(cid("a1")))
	})
	st := s.store()
	_, err := st.PutObject(t.Context(), "v1", "x", strings.NewReader("x"), nil)
	if !errors.Is(err, artifacts.ErrReadOnlyRef) {
		t.Fatalf("put to a tag: got %v, want ErrReadOnlyRef", err)
	}
	_, err = st.PutObject(t.Context(), "nope", "x", strings.NewReader("x"), nil)
	if !errors.Is(err, artifacts.ErrBranchNotFound) {
		t.Fatalf("put to a missing branch: got %v, want ErrBranchNotFound", err)
	}
	_, err = st.PutObject(t.Context(), "main~1", "x", strings.NewReader("x"), nil)
	if !errors.Is(err, artifacts.ErrReadOnlyRef) {
		t.Fatalf("put to main~1: got %v, want ErrReadOnlyRef", err)
	}
}

// TestValidationBeforeRequest checks that bad arguments fail without a
// request, and that the default branch is protected client-side.
func TestValidationBeforeRequest(t *testing.T) {
	ctx := t.Context()
	s := newStub(t)
	st := s.store()
	checks := []struct {
		name string
		err  error
		want error
	}{
		{"branch name", func() error { _, err := st.CreateBranch(ctx, "a/b", "main"); return err }(), artifacts.ErrInvalid},
		{"source ref", func() error { _, err := st.CreateBranch(ctx, "b", "main~x"); return err }(), artifacts.ErrInvalidRef},
		{"tag name", func() error { _, err := st.CreateTag(ctx, "x~1", "main"); return err }(), artifacts.ErrInvalid},
		{"path", func() error { _, err := st.PutObject(ctx, "main", "/abs", strings.NewReader(""), nil); return err }(), artifacts.ErrInvalid},
		{"empty path", func() error { _, err := st.StatObject(ctx, "main", ""); return err }(), artifacts.ErrInvalid},
		{"metadata key", func() error {
			_, err := st.PutObject(ctx, "main", "p", strings.NewReader(""), &artifacts.PutOptions{Metadata: map[string]string{"bad key": "v"}})
			return err
		}(), artifacts.ErrInvalid},
		{"metadata value", func() error {
			_, err := st.PutObject(ctx, "main", "p", strings.NewReader(""), &artifacts.PutOptions{Metadata: map[string]string{"k": "a\nb"}})
			return err
		}(), artifacts.ErrInvalid},
		{"ref", func() error { _, err := st.ResolveRef(ctx, "a b"); return err }(), artifacts.ErrInvalid},
		{"short commit id", func() error { _, err := st.GetCommit(ctx, "abc"); return err }(), artifacts.ErrCommitNotFound},
		{"content type", func() error {
			_, err := st.PutObject(ctx, "main", "p", strings.NewReader(""), &artifacts.PutOptions{ContentType: "text/plain; charset"})
			return err
		}(), artifacts.ErrInvalid},
		{"metadata value with outer space", func() error {
			_, err := st.PutObject(ctx, "main", "p", strings.NewReader(""), &artifacts.PutOptions{Metadata: map[string]string{"k": " v"}})
			return err
		}(), artifacts.ErrInvalid},
		{"default branch", st.DeleteBranch(ctx, "main"), artifacts.ErrProtected},
		{"strategy", func() error {
			_, err := st.Merge(ctx, "a", "main", &artifacts.MergeOptions{Strategy: "theirs"})
			return err
		}(), artifacts.ErrInvalid},
	}
	for _, c := range checks {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.err, c.want)
		}
	}
	if reqs := s.requests(); len(reqs) != 0 {
		t.Fatalf("requests were sent: %v", reqs)
	}
}

// TestCredentialsNeverInErrors has a server echo the credentials it
// received in every error message; no error may show them.
func TestCredentialsNeverInErrors(t *testing.T) {
	ctx := t.Context()
	s := newStub(t)
	s.handle("/", func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		if user != testKey || pass != testSecret {
			t.Errorf("server got credentials %q:%q", user, pass)
		}
		writeError(w, 401, fmt.Sprintf("bad credentials %s:%s (header %q)", user, pass, r.Header.Get("Authorization")))
	})
	st := s.store()
	var errs []error
	_, err := st.GetBranch(ctx, "dev")
	errs = append(errs, err)
	_, err = st.PutObject(ctx, "main", "x", strings.NewReader("data"), nil)
	errs = append(errs, err)
	for _, err := range st.ListBranches(ctx) {
		errs = append(errs, err)
	}
	_, err = st.Merge(ctx, "dev", "main", nil)
	errs = append(errs, err)

	// A transport error against a closed server.
	closed := newStub(t)
	cst := closed.store()
	closed.srv.Close()
	_, err = cst.GetBranch(ctx, "dev")
	errs = append(errs, err)

	for _, err := range errs {
		if err == nil {
			t.Fatalf("expected an error")
		}
		for e := err; e != nil; e = errors.Unwrap(e) {
			msg := e.Error() + fmt.Sprintf(" %v %+v %#v", e, e, e)
			basic := base64.StdEncoding.EncodeToString([]byte(testKey + ":" + testSecret))
			if strings.Contains(msg, testSecret) || strings.Contains(msg, testKey) || strings.Contains(msg, basic) {
				t.Fatalf("error shows credentials: %v", e)
			}
		}
	}
	if !errors.Is(errs[0], artifacts.ErrUnauthorized) {
		t.Fatalf("got %v, want ErrUnauthorized", errs[0])
	}

	cfg := Config{Endpoint: "http://x", AccessKeyID: testKey, SecretAccessKey: testSecret}
	c := st.Client()
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), fmt.Sprint(c), fmt.Sprintf("%+v %#v", c, c)} {
		if strings.Contains(s, testSecret) {
			t.Fatalf("printing shows the secret: %s", s)
		}
	}
}

// TestPagination checks that listings follow next_offset across pages and
// stop where asked.
func TestPagination(t *testing.T) {
	ctx := t.Context()
	s := newStub(t)
	var all []string
	for i := range 25 {
		all = append(all, fmt.Sprintf("p/%02d", i))
	}
	s.handle("GET /repositories/{repo}/refs/{ref}/objects/ls", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		amount, _ := strconv.Atoi(q.Get("amount"))
		if amount < 1 || amount > 1000 {
			t.Errorf("amount %q out of range", q.Get("amount"))
		}
		amount = min(amount, 10) // the server may return less than asked
		start := 0
		if after := q.Get("after"); after != "" {
			start = len(all)
			for i, p := range all {
				if p > after {
					start = i
					break
				}
			}
		}
		end := min(start+amount, len(all))
		var res []map[string]any
		for _, p := range all[start:end] {
			res = append(res, map[string]any{"path": p, "path_type": "object", "checksum": "c" + p, "size_bytes": 1, "mtime": 1700000000, "physical_address": "local://x"})
		}
		next := ""
		if end > start {
			next = all[end-1]
		}
		writeJSON(w, 200, map[string]any{
			"pagination": map[string]any{"has_more": end < len(all), "next_offset": next, "results": end - start, "max_per_page": 1000},
			"results":    res,
		})
	})
	st := s.store()
	paths := func(opts *artifacts.ListOptions) []string {
		var out []string
		for e, err := range st.ListObjects(ctx, "main", opts) {
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			out = append(out, e.Path)
		}
		return out
	}
	if got := paths(nil); !slices.Equal(got, all) {
		t.Fatalf("list all: got %v", got)
	}
	if got := paths(&artifacts.ListOptions{After: "p/03", Limit: 12}); !slices.Equal(got, all[4:16]) {
		t.Fatalf("list after p/03 limit 12: got %v", got)
	}
	// Breaking out of the loop stops the requests.
	before := len(s.requests())
	for range st.ListObjects(ctx, "main", nil) {
		break
	}
	if n := len(s.requests()) - before; n != 1 {
		t.Fatalf("break after the first entry sent %d requests, want 1", n)
	}
	s.mu.Lock()
	conns := s.conns
	s.mu.Unlock()
	if reqs := len(s.requests()); conns > 1 {
		t.Fatalf("%d requests opened %d connections: answers are not drained for reuse", reqs, conns)
	}
	reqs := s.requests()
	if !strings.Contains(reqs[0], "amount=1000") || !strings.Contains(reqs[1], "after=p%2F09") {
		t.Fatalf("requests %v: want amount=1000, then after the last path", reqs[:2])
	}

	t.Run("has_more without next_offset", func(t *testing.T) {
		s := newStub(t)
		s.handle("GET /repositories/{repo}/branches", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 200, map[string]any{"pagination": map[string]any{"has_more": true, "next_offset": ""}, "results": []any{map[string]string{"id": "a", "commit_id": "c"}}})
		})
		var n int
		var last error
		for _, err := range s.store().ListBranches(ctx) {
			n++
			last = err
		}
		if n != 2 || last == nil {
			t.Fatalf("got %d items ending in %v, want one branch and an error", n, last)
		}
	})
}

// TestLogQuery checks the log parameters, that Limit stops the walk, and
// that a ref lakeFS's log refuses (it validates its ref as a branch name)
// is resolved to a commit id first.
func TestLogQuery(t *testing.T) {
	s := newStub(t)
	s.handle("GET /repositories/{repo}/commits/{ref}", func(w http.ResponseWriter, r *http.Request) {
		if ref := r.PathValue("ref"); ref != "main~1" && ref != "v1.0" {
			t.Errorf("resolve: got ref %q, want main~1 (lakeFS takes @ only alone)", ref)
		}
		writeJSON(w, 200, commitJSON(cid("b0"), cid("b1")))
	})
	s.handle("GET /repositories/{repo}/refs/{ref}/commits", func(w http.ResponseWriter, r *http.Request) {
		if ref := r.PathValue("ref"); !reLogRef.MatchString(ref) {
			// As lakeFS: catalog.ListCommits validates the ref with ValidateBranchID.
			writeError(w, 400, "argument branch: branch id: invalid value: validation error")
			return
		}
		writeJSON(w, 200, map[string]any{
			"pagination": map[string]any{"has_more": true, "next_offset": cid("b2")},
			"results":    []any{commitJSON(cid("b1"), cid("b2")), commitJSON(cid("b2"), cid("b3"))},
		})
	})
	var got []string
	opts := &artifacts.LogOptions{Limit: 3, FirstParent: true, Paths: []string{"a", "b"}, Prefixes: []string{"d/"}}
	for c, err := range s.store().Log(t.Context(), "main@~1", opts) {
		if err != nil {
			t.Fatalf("log: %v", err)
		}
		got = append(got, c.ID)
	}
	if len(got) != 3 {
		t.Fatalf("log with limit 3: got %d commits", len(got))
	}
	r := s.lastRequest()
	q := r.URL.Query()
	if !strings.HasSuffix(r.URL.Path, "/refs/"+cid("b0")+"/commits") {
		t.Errorf("log ref: got path %s, want the commit id main~1 resolves to", r.URL.Path)
	}
	if !slices.Equal(q["objects"], []string{"a", "b"}) || !slices.Equal(q["prefixes"], []string{"d/"}) ||
		q.Get("first_parent") != "true" || q.Get("limit") != "true" || q.Get("amount") != "3" || q.Get("after") != cid("b2") {
		t.Errorf("log query: got %v", q)
	}

	// Refs the log takes as they are: one request each, no resolution.
	for _, ref := range []string{"main", "release-1", cid("b0")[:12]} {
		before := len(s.requests())
		for _, err := range s.store().Log(t.Context(), ref, &artifacts.LogOptions{Limit: 1}) {
			if err != nil {
				t.Fatalf("log %s: %v", ref, err)
			}
		}
		reqs := s.requests()[before:]
		if len(reqs) != 1 || !strings.Contains(reqs[0], "/refs/"+ref+"/commits?") {
			t.Errorf("log %s: requests %v, want one log request on the ref itself", ref, reqs)
		}
	}
	// A dotted tag cannot be a branch name: resolved first too.
	before := len(s.requests())
	for range s.store().Log(t.Context(), "v1.0", &artifacts.LogOptions{Limit: 1}) {
	}
	if reqs := s.requests()[before:]; len(reqs) == 0 || !strings.HasPrefix(reqs[0], "GET /repositories/"+testRepo+"/commits/v1.0") {
		t.Errorf("log v1.0: requests %v, want the tag resolved first", reqs)
	}
}

// reLogRef is the branch-name rule lakeFS applies to the log's ref.
var reLogRef = regexp.MustCompile(`^\w[-\w]*$`)

// TestCommitFields checks the commit body and the decoding of the answer.
func TestCommitFields(t *testing.T) {
	s := newStub(t)
	var body map[string]any
	s.handle("POST /repositories/{repo}/branches/{branch}/commits", func(w http.ResponseWriter, r *http.Request) {
		if err := decodeJSON(r.Body, &body); err != nil {
			t.Errorf("commit body: %v", err)
		}
		writeJSON(w, 201, map[string]any{
			"id": cid("c1"), "parents": []string{cid("c0")}, "committer": "admin", "message": "m",
			"creation_date": 1700000123, "meta_range_id": "mr1", "metadata": map[string]string{"k": "v"}, "generation": 7,
		})
	})
	date := time.Unix(1600000000, 0)
	c, err := s.store().Commit(t.Context(), "main", "m", &artifacts.CommitOptions{Metadata: map[string]string{"k": "v"}, AllowEmpty: true, Date: date})
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	want := artifacts.Commit{ID: cid("c1"), Parents: []string{cid("c0")}, Committer: "admin", Message: "m",
		CreationDate: time.Unix(1700000123, 0).UTC(), Metadata: map[string]string{"k": "v"}, MetaRangeID: "mr1", Generation: 7}
	if fmt.Sprint(c) != fmt.Sprint(want) {
		t.Fatalf("commit: got %+v, want %+v", c, want)
	}
	if body["message"] != "m" || body["allow_empty"] != true || body["date"] != float64(1600000000) ||
		fmt.Sprint(body["metadata"]) != "map[k:v]" {
		t.Fatalf("commit body: got %v", body)
	}
}

// TestObjectMetadata checks the upload headers and that metadata keys
// come back lower-case whatever case the server stored.
func TestObjectMetadata(t *testing.T) {
	ctx := t.Context()
	s := newStub(t)
	var got http.Header
	s.handle("POST /repositories/{repo}/branches/{branch}/objects", func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		n, _ := io.Copy(io.Discard, r.Body)
		if r.URL.Query().Get("path") != "data/x.parquet" {
			t.Errorf("path query: %q", r.URL.RawQuery)
		}
		writeJSON(w, 201, map[string]any{"path": "data/x.parquet", "path_type": "object", "checksum": "abc", "size_bytes": n,
			"mtime": 1700000000, "physical_address": "local://x", "content_type": r.Header.Get("Content-Type"),
			"metadata": map[string]string{"rlpipe-task": "t"}})
	})
	s.handle("GET /repositories/{repo}/refs/{ref}/objects/stat", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("user_metadata") != "true" {
			t.Errorf("stat without user_metadata=true: %q", r.URL.RawQuery)
		}
		writeJSON(w, 200, map[string]any{"path": "data/x.parquet", "path_type": "object", "checksum": "abc", "size_bytes": 5,
			"mtime": 1700000000, "physical_address": "local://x", "content_type": "application/vnd.apache.parquet",
			"metadata": map[string]string{"Rlpipe-Task": "t", "X-Lakefs-Meta-Owner": "rl", "rlpipe-seed": "7"}})
	})
	st := s.store()
	meta := map[string]string{"rlpipe-task": "t", "owner": "rl"}
	info, err := st.PutObject(ctx, "main", "data/x.parquet", strings.NewReader("hello"),
		&artifacts.PutOptions{ContentType: "application/vnd.apache.parquet", Metadata: meta, IfAbsent: true})
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	// The SHA-256 of "hello" is sent to be recorded with the object; this
	// server's answer does not echo it, so the checksum is the server's.
	const helloSHA256 = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
	if info.Size != 5 || info.Checksum != "abc" || info.Path != "data/x.parquet" {
		t.Fatalf("put info: %+v", info)
	}
	for h, want := range map[string]string{
		"X-Lakefs-Meta-Rlpipe-Task": "t", "X-Lakefs-Meta-Owner": "rl", "If-None-Match": "*",
		"Content-Type": "application/vnd.apache.parquet", "X-Lakefs-Meta-Rlpipe-Sha256": helloSHA256,
	} {
		if got.Get(h) != want {
			t.Errorf("header %s: got %q, want %q", h, got.Get(h), want)
		}
	}
	if user, pass, ok := s.lastRequest().BasicAuth(); !ok || user != testKey || pass != testSecret {
		t.Errorf("upload without basic auth")
	}

	st2, err := st.StatObject(ctx, "main", "data/x.parquet")
	if err != nil {
		t.Fatalf("stat: %v", err)
	}
	want := map[string]string{"rlpipe-task": "t", "owner": "rl", "rlpipe-seed": "7"}
	if fmt.Sprint(st2.Metadata) != fmt.Sprint(want) {
		t.Fatalf("stat metadata: got %v, want %v", st2.Metadata, want)
	}
	if !st2.Mtime.Equal(time.Unix(1700000000, 0)) || st2.ContentType != "application/vnd.apache.parquet" {
		t.Fatalf("stat: got %+v", st2)
	}
}

// TestBodyLength checks that a known length is sent as Content-Length and
// an unknown one as a chunked body.
func TestBodyLength(t *testing.T) {
	s := newStub(t)
	var lengths []int64
	s.handle("POST /repositories/{repo}/branches/{branch}/objects", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		lengths = append(lengths, r.ContentLength)
		writeJSON(w, 201, map[string]any{"path": "p", "path_type": "object", "checksum": "c", "size_bytes": n, "mtime": 1})
	})
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("0123456789"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(3, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	st := s.store()
	for _, r := range []io.Reader{bytes.NewReader([]byte("abc")), struct{ io.Reader }{strings.NewReader("abc")}, f, strings.NewReader("")} {
		if _, err := st.PutObject(t.Context(), "main", "p", r, nil); err != nil {
			t.Fatalf("put: %v", err)
		}
	}
	if want := []int64{3, -1, 7, 0}; !slices.Equal(lengths, want) {
		t.Fatalf("content lengths: got %v, want %v", lengths, want)
	}
	// The caller's file stays open.
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatalf("the store closed the caller's reader: %v", err)
	}
}

// gatedReader produces size bytes, but past gateAt it waits until the
// server has received some: a store that buffered the whole body before
// sending would never get there.
type gatedReader struct {
	size, gateAt, n int64
	opened          <-chan struct{}
}

var errNotStreamed = errors.New("the body was not streamed: the server had received nothing after 16 MiB were produced")

func (g *gatedReader) Read(p []byte) (int, error) {
	if g.n >= g.size {
		return 0, io.EOF
	}
	if g.n >= g.gateAt && g.opened != nil {
		select {
		case <-g.opened:
			g.opened = nil
		case <-time.After(time.Minute):
			return 0, errNotStreamed
		}
	}
	p = p[:min(int64(len(p)), g.size-g.n)]
	for i := range p {
		p[i] = byte(g.n + int64(i))
	}
	g.n += int64(len(p))
	return len(p), nil
}

// TestPutObjectStreams uploads 64 MiB from a reader that stalls until the
// server has started receiving, and a server that discards what it reads.
func TestPutObjectStreams(t *testing.T) {
	const size = 64 << 20
	s := newStub(t)
	opened := make(chan struct{})
	s.handle("POST /repositories/{repo}/branches/{branch}/objects", func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 32<<10)
		var n int64
		for {
			k, err := r.Body.Read(buf)
			n += int64(k)
			if n >= 1<<20 && opened != nil {
				close(opened)
				opened = nil
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				writeError(w, 500, err.Error())
				return
			}
		}
		writeJSON(w, 201, map[string]any{"path": "big", "path_type": "object", "checksum": "c", "size_bytes": n, "mtime": 1})
	})
	r := &gatedReader{size: size, gateAt: 16 << 20, opened: opened}
	info, err := s.store().PutObject(t.Context(), "main", "big", r, nil)
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	if info.Size != size {
		t.Fatalf("server received %d bytes, want %d", info.Size, size)
	}
}

// TestGetObjectRange checks the Range header and the handling of a server
// that ignores it.
func TestGetObjectRange(t *testing.T) {
	ctx := t.Context()
	content := []byte("0123456789abcdef")
	s := newStub(t)
	ignoreRange := false
	var ranges []string
	s.handle("GET /repositories/{repo}/refs/{ref}/objects", func(w http.ResponseWriter, r *http.Request) {
		ranges = append(ranges, r.Header.Get("Range"))
		if ignoreRange || r.Header.Get("Range") == "" {
			w.Write(content)
			return
		}
		var from, to int
		spec := strings.TrimPrefix(r.Header.Get("Range"), "bytes=")
		a, b, _ := strings.Cut(spec, "-")
		from, _ = strconv.Atoi(a)
		to = len(content) - 1
		if b != "" {
			to, _ = strconv.Atoi(b)
		}
		if from >= len(content) {
			writeError(w, 416, "Requested Range Not Satisfiable")
			return
		}
		to = min(to, len(content)-1)
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, to, len(content)))
		w.WriteHeader(http.StatusPartialContent)
		w.Write(content[from : to+1])
	})
	s.handle("GET /repositories/{repo}/refs/{ref}/objects/stat", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"path": "p", "path_type": "object", "checksum": "c", "size_bytes": len(content), "mtime": 1})
	})
	st := s.store()
	read := func(off, n int64) string {
		t.Helper()
		rc, err := st.GetObjectRange(ctx, "main", "p", off, n)
		if err != nil {
			t.Fatalf("range %d+%d: %v", off, n, err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatalf("range %d+%d: read: %v", off, n, err)
		}
		return string(b)
	}
	for _, ignore := range []bool{false, true} {
		ignoreRange = ignore
		for _, c := range []struct {
			off, n int64
			want   string
		}{{0, 4, "0123"}, {10, -1, "abcdef"}, {14, 10, "ef"}, {16, 4, ""}, {3, 0, ""}} {
			if got := read(c.off, c.n); got != c.want {
				t.Errorf("range %d+%d (server ignores Range: %v): got %q, want %q", c.off, c.n, ignore, got, c.want)
			}
		}
	}
	if want := []string{"bytes=0-3", "bytes=10-", "bytes=14-23", "bytes=16-19"}; !slices.Equal(ranges[:4], want) {
		t.Fatalf("range headers: got %v, want %v", ranges[:4], want)
	}
}

// TestMergeConflictPaths has the server refuse a merge with 409 and an
// empty MergeResult, as lakeFS does, and checks the paths recomputed from
// the diffs of both sides against the merge base.
func TestMergeConflictPaths(t *testing.T) {
	base, src, dst := cid("ba5e"), cid("5c"), cid("d5")
	s := newStub(t)
	s.handle("POST /repositories/{repo}/refs/{src}/merge/{dst}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusConflict, map[string]string{"reference": ""})
	})
	s.handle("GET /repositories/{repo}/refs/{src}/merge/{dst}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]string{"base_commit_id": base, "source_commit_id": src, "destination_commit_id": dst})
	})
	diffs := map[string][]map[string]any{
		src: {{"type": "changed", "path": "both-changed"}, {"type": "changed", "path": "same-change"},
			{"type": "removed", "path": "both-removed"}, {"type": "changed", "path": "removed-vs-changed"},
			{"type": "added", "path": "only-source"}, {"type": "added", "path": "both-added"}},
		dst: {{"type": "changed", "path": "both-changed"}, {"type": "changed", "path": "same-change"},
			{"type": "removed", "path": "both-removed"}, {"type": "removed", "path": "removed-vs-changed"},
			{"type": "added", "path": "only-dest"}, {"type": "added", "path": "both-added"}},
	}
	s.handle("GET /repositories/{repo}/refs/{left}/diff/{right}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("left") != base || r.URL.Query().Get("type") != "two_dot" {
			t.Errorf("diff %s..%s type %s: want a two-dot diff from the merge base", r.PathValue("left"), r.PathValue("right"), r.URL.Query().Get("type"))
		}
		rows := diffs[r.PathValue("right")]
		for _, d := range rows {
			d["path_type"] = "object"
		}
		writeJSON(w, 200, map[string]any{"pagination": map[string]any{"has_more": false}, "results": rows})
	})
	s.handle("GET /repositories/{repo}/refs/{ref}/objects/stat", func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Query().Get("path")
		sum := "same"
		if p != "same-change" {
			sum = r.PathValue("ref")
		}
		writeJSON(w, 200, map[string]any{"path": p, "path_type": "object", "checksum": sum, "size_bytes": 1, "mtime": 1})
	})
	_, err := s.store().Merge(t.Context(), "feature", "main", nil)
	var mc *artifacts.MergeConflictError
	if !errors.As(err, &mc) || !errors.Is(err, artifacts.ErrMergeConflict) {
		t.Fatalf("got %v, want a *MergeConflictError", err)
	}
	if want := []string{"both-added", "both-changed", "removed-vs-changed"}; !slices.Equal(mc.Paths, want) {
		t.Fatalf("conflict paths: got %v, want %v", mc.Paths, want)
	}
	if mc.Source != "feature" || mc.Destination != "main" {
		t.Fatalf("conflict sides: got %s into %s", mc.Source, mc.Destination)
	}
}

// TestMergeAndRevertResults checks that a merge returns the commit the
// server names and a revert (answered with no body) the new branch head.
func TestMergeAndRevertResults(t *testing.T) {
	ctx := t.Context()
	s := newStub(t)
	var mergeBody, revertBody map[string]any
	s.handle("POST /repositories/{repo}/refs/{src}/merge/{dst}", func(w http.ResponseWriter, r *http.Request) {
		_ = decodeJSON(r.Body, &mergeBody)
		writeJSON(w, 200, map[string]string{"reference": cid("e1")})
	})
	s.handle("POST /repositories/{repo}/branches/{branch}/revert", func(w http.ResponseWriter, r *http.Request) {
		_ = decodeJSON(r.Body, &revertBody)
		w.WriteHeader(http.StatusNoContent)
	})
	s.handle("GET /repositories/{repo}/branches/{branch}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]string{"id": r.PathValue("branch"), "commit_id": cid("f1")})
	})
	s.handle("GET /repositories/{repo}/commits/{id}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, commitJSON(r.PathValue("id"), cid("1"), cid("2")))
	})
	st := s.store()
	c, err := st.Merge(ctx, "feature", "main", &artifacts.MergeOptions{Message: "m", Strategy: artifacts.StrategySourceWins, AllowEmpty: true, Metadata: map[string]string{"k": "v"}})
	if err != nil || c.ID != cid("e1") {
		t.Fatalf("merge: got %v, %v", c.ID, err)
	}
	if mergeBody["message"] != "m" || mergeBody["strategy"] != "source-wins" || mergeBody["allow_empty"] != true {
		t.Fatalf("merge body: %v", mergeBody)
	}
	c, err = st.Revert(ctx, "main", "main~1", 0, &artifacts.CommitOptions{Metadata: map[string]string{"k": "v"}})
	if err != nil || c.ID != cid("f1") {
		t.Fatalf("revert: got %v, %v", c.ID, err)
	}
	if revertBody["ref"] != "main~1" || revertBody["parent_number"] != float64(1) || fmt.Sprint(revertBody["commit_overrides"]) != "map[metadata:map[k:v]]" {
		t.Fatalf("revert body: %v", revertBody)
	}
}

func TestRefArg(t *testing.T) {
	for in, want := range map[string]string{
		"main": "main", "main@": "main@", "main$": "main", "main~": "main~1", "main^^": "main^1^1",
		"main@~1": "main~1", "v1.0": "v1.0", "abc123^2~3": "abc123^2~3", "main^0": "main^0",
	} {
		if got, err := refArg(in); err != nil || got != want {
			t.Errorf("refArg(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestCreateRepository checks the creation body and the storage namespace
// defaults.
func TestCreateRepository(t *testing.T) {
	for _, c := range []struct {
		name, env, opt, want string
	}{
		{"option", "s3://env", "s3://bucket/explicit", "s3://bucket/explicit"},
		{"environment", "s3://bucket/rl/", "", "s3://bucket/rl/" + testRepo},
		{"quickstart", "", "", "local://" + testRepo},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(EnvNamespace, c.env)
			s := newStub(t)
			var body map[string]any
			s.handle("POST /repositories", func(w http.ResponseWriter, r *http.Request) {
				_ = decodeJSON(r.Body, &body)
				writeJSON(w, 201, map[string]any{"id": body["name"], "default_branch": body["default_branch"], "storage_namespace": body["storage_namespace"], "creation_date": 1})
			})
			s.handle("GET /repositories/{repo}", func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, 200, map[string]any{"id": r.PathValue("repo"), "default_branch": "trunk", "storage_namespace": "x", "creation_date": 1700000000})
			})
			st, err := Create(t.Context(), s.client(), testRepo, &artifacts.Options{StorageNamespace: c.opt, DefaultBranch: "trunk"})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			defer st.Close()
			if body["name"] != testRepo || body["storage_namespace"] != c.want || body["default_branch"] != "trunk" {
				t.Fatalf("create body: %v", body)
			}
			r, err := st.Repository(t.Context())
			if err != nil || r.Name != testRepo || r.DefaultBranch != "trunk" || !r.CreatedAt.Equal(time.Unix(1700000000, 0)) {
				t.Fatalf("repository: %+v, %v", r, err)
			}
			if err := st.DeleteBranch(t.Context(), "trunk"); !errors.Is(err, artifacts.ErrProtected) {
				t.Fatalf("delete the default branch: got %v", err)
			}
		})
	}
}

func TestOpenMissingRepository(t *testing.T) {
	s := newStub(t)
	s.handle("GET /repositories/{repo}", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, 404, "repository not found")
	})
	_, err := Open(context.Background(), s.client(), testRepo, nil)
	if !errors.Is(err, artifacts.ErrRepositoryNotFound) || !strings.Contains(err.Error(), "rlpipe init-store --store lakefs://"+testRepo) {
		t.Fatalf("got %v, want ErrRepositoryNotFound with the command that creates it", err)
	}
}

func TestRegistered(t *testing.T) {
	if !slices.Contains(artifacts.Schemes(), Scheme) {
		t.Fatalf("scheme %q not registered: %v", Scheme, artifacts.Schemes())
	}
	t.Setenv(EnvEndpoint, "")
	_, err := artifacts.Open(t.Context(), "lakefs://some-repo", nil)
	if !errors.Is(err, artifacts.ErrInvalid) || !strings.Contains(err.Error(), EnvEndpoint) {
		t.Fatalf("open without an endpoint: got %v, want ErrInvalid naming %s", err, EnvEndpoint)
	}
}

// countingReader produces size bytes and counts what was read.
type countingReader struct{ size, n int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	if c.n >= c.size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), c.size-c.n)]
	clear(p)
	c.n += int64(len(p))
	return len(p), nil
}

// TestIfAbsentRefusedEarly has the server refuse an upload before reading
// its body, as lakeFS does for If-None-Match on an existing path.
func TestIfAbsentRefusedEarly(t *testing.T) {
	s := newStub(t)
	s.handle("POST /repositories/{repo}/branches/{branch}/objects", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") != "*" {
			t.Errorf("If-None-Match: %q", r.Header.Get("If-None-Match"))
		}
		writeError(w, http.StatusPreconditionFailed, "path already exists")
	})
	const size = 1 << 30
	r := &countingReader{size: size}
	_, err := s.store().PutObject(t.Context(), "main", "p", r, &artifacts.PutOptions{IfAbsent: true})
	if !errors.Is(err, artifacts.ErrObjectExists) {
		t.Fatalf("got %v, want ErrObjectExists", err)
	}
	if r.n >= size {
		t.Fatalf("the whole body was sent to a server that refused it")
	}
}

// TestResolveRefAsked checks that ResolveRef asks GET /commits/{ref},
// which dereferences any ref expression, with the expression as it is,
// and that a missing ref is ErrRefNotFound although the server says
// "commit not found" for a missing branch or tag too.
func TestResolveRefAsked(t *testing.T) {
	ctx := t.Context()
	s := newStub(t)
	s.handle("GET /repositories/{repo}/refs/{ref}/commits", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("resolve asked the log, which refuses ref expressions")
	})
	s.handle("GET /repositories/{repo}/commits/{ref}", func(w http.ResponseWriter, r *http.Request) {
		switch ref := r.PathValue("ref"); ref {
		case "no-such-ref":
			// As lakeFS's GetCommit handler: the same text whatever is missing.
			writeError(w, 404, "commit not found")
		default:
			writeJSON(w, 200, commitJSON(cid("c1"), cid("c0")))
		}
	})
	st := s.store()
	for _, ref := range []string{"main", "main~2", "main^2", "main@", "main^^", "v1.0", cid("c1")[:12] + "^1"} {
		c, err := st.ResolveRef(ctx, ref)
		if err != nil || c.ID != cid("c1") || !slices.Equal(c.Parents, []string{cid("c0")}) {
			t.Fatalf("resolve %s: got %+v, %v", ref, c, err)
		}
		want, _ := refArg(ref)
		if got := s.lastRequest().URL.Path; got != apiBasePath+"/repositories/"+testRepo+"/commits/"+want {
			t.Fatalf("resolve %s: asked %s", ref, got)
		}
	}
	_, err := st.ResolveRef(ctx, "no-such-ref")
	if !errors.Is(err, artifacts.ErrRefNotFound) || errors.Is(err, artifacts.ErrCommitNotFound) {
		t.Fatalf("resolve a missing ref: got %v, want ErrRefNotFound (not a missing commit)", err)
	}
}

// TestCopyObject checks the copy request: destination in the query, the
// source in the body, and never a shallow copy, within one branch or
// across two: lakeFS v1.84.0 refuses every shallow copy with 501.
func TestCopyObject(t *testing.T) {
	s := newStub(t)
	var got struct {
		dest string
		body map[string]any
	}
	s.handle("POST /repositories/{repository}/branches/{branch}/objects/copy", func(w http.ResponseWriter, r *http.Request) {
		got.dest = r.URL.Query().Get("dest_path")
		json.NewDecoder(r.Body).Decode(&got.body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"path": %q, "path_type": "object", "physical_address": "local://x", "checksum": "abc", "size_bytes": 3, "mtime": 1700000000}`, got.dest)
	})
	st := s.store()
	info, err := st.CopyObject(t.Context(), "runs-a", "iterations/000001/x.parquet", "runs-a", "iterations/000002/x.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if got.dest != "iterations/000002/x.parquet" || got.body["src_path"] != "iterations/000001/x.parquet" || got.body["src_ref"] != "runs-a" || got.body["shallow"] != nil {
		t.Fatalf("request: dest %q body %v", got.dest, got.body)
	}
	if info.Checksum != "abc" || info.Size != 3 || info.Path != "iterations/000002/x.parquet" {
		t.Fatalf("info = %+v", info)
	}
	got.body = nil
	if _, err := st.CopyObject(t.Context(), "main", "a", "runs-a", "b"); err != nil {
		t.Fatal(err)
	}
	if got.body["shallow"] != nil {
		t.Fatalf("copy across branches asked for a shallow copy: %v", got.body)
	}
}

// TestCopyObjectShallowRefused checks what a copy reports when the server
// refuses it as lakeFS v1.84.0 refuses a shallow copy: the status and the
// server's words, not a named error the caller would act on.
func TestCopyObjectShallowRefused(t *testing.T) {
	s := newStub(t)
	s.handle("POST /repositories/{repository}/branches/{branch}/objects/copy", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotImplemented, "Not Implemented")
	})
	_, err := s.store().CopyObject(t.Context(), "runs-a", "a", "runs-a", "b")
	if err == nil || !strings.Contains(err.Error(), "server answered 501: Not Implemented") || errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("copy refused with 501: got %v", err)
	}
}
