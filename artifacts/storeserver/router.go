package storeserver

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/internal/lakefsapi"
)

// call is one request being answered: its path parameters (unescaped)
// and its query.
type call struct {
	w http.ResponseWriter
	r *http.Request
	p map[string]string
	q url.Values
}

func (c *call) ctx() context.Context { return c.r.Context() }

// required returns a query parameter that must be present and non-empty.
func (c *call) required(name string) (string, error) {
	v := c.q.Get(name)
	if v == "" {
		return "", errorf(http.StatusBadRequest, "%s %s: missing query parameter %q", c.r.Method, c.r.URL.Path, name)
	}
	return v, nil
}

// boolean parses a true/false query parameter; absent means def.
func (c *call) boolean(name string, def bool) (bool, error) {
	v := c.q.Get(name)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errorf(http.StatusBadRequest, "query parameter %s=%q: want true or false", name, v)
	}
	return b, nil
}

// amount is the page size: the amount parameter, 100 when absent or not
// positive, at most 1000.
func (c *call) amount() (int, error) {
	v := c.q.Get("amount")
	if v == "" {
		return defaultPageSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, errorf(http.StatusBadRequest, "query parameter amount=%q: want a whole number up to %d", v, maxPageSize)
	}
	if n <= 0 {
		return defaultPageSize, nil
	}
	return min(n, maxPageSize), nil
}

// branch returns the path parameter name, which must be a valid branch name.
func (c *call) branch(name string) (string, error) {
	b := c.p[name]
	if err := artifacts.ValidateBranchName(b); err != nil {
		return "", errorf(http.StatusBadRequest, "invalid branch name %q in %s %s: use letters, digits, '_' and '-', starting with a letter, digit or '_'", b, c.r.Method, c.r.URL.Path)
	}
	return b, nil
}

// branchBody reads a request's {branch} path parameter, then its JSON
// body as a T, in that order: a bad branch name is answered first.
func branchBody[T any](s *Server, c *call) (string, T, error) {
	var body T
	branch, err := c.branch("branch")
	if err != nil {
		return "", body, err
	}
	err = decodeJSON(c.r, s.opts.MaxJSONBytes, &body, false)
	return branch, body, err
}

// branchPath is the {branch} of an object endpoint and its required
// path query parameter, in that order of checks.
func (c *call) branchPath() (branch, path string, err error) {
	if branch, err = c.branch("branch"); err != nil {
		return "", "", err
	}
	if path, err = c.required("path"); err != nil {
		return "", "", err
	}
	return branch, path, nil
}

// route is one endpoint: a method and a path template under /api/v1 whose
// {name} segments each match one path segment.
type route struct {
	method   string
	template string
	handle   func(s *Server, c *call) error
}

// routes lists every endpoint the server answers, in the OpenAPI
// document's spelling: those the lakefs:// backend sends
// (artifacts/lakefs/stub_test.go) and HEAD on objects.
var routes = []route{
	{"POST", "/repositories", (*Server).createRepository},
	{"GET", "/repositories/{repository}", (*Server).getRepository},
	{"DELETE", "/repositories/{repository}", (*Server).deleteRepository},
	{"GET", "/repositories/{repository}/branches", (*Server).listBranches},
	{"POST", "/repositories/{repository}/branches", (*Server).createBranch},
	{"GET", "/repositories/{repository}/branches/{branch}", (*Server).getBranch},
	{"DELETE", "/repositories/{repository}/branches/{branch}", (*Server).deleteBranch},
	{"PUT", "/repositories/{repository}/branches/{branch}", (*Server).resetBranch},
	{"GET", "/repositories/{repository}/tags", (*Server).listTags},
	{"POST", "/repositories/{repository}/tags", (*Server).createTag},
	{"GET", "/repositories/{repository}/tags/{tag}", (*Server).getTag},
	{"DELETE", "/repositories/{repository}/tags/{tag}", (*Server).deleteTag},
	{"GET", "/repositories/{repository}/refs/{ref}/commits", (*Server).logCommits},
	{"GET", "/repositories/{repository}/commits/{commitId}", (*Server).getCommit},
	{"POST", "/repositories/{repository}/branches/{branch}/commits", (*Server).commit},
	{"POST", "/repositories/{repository}/branches/{branch}/objects", (*Server).uploadObject},
	{"DELETE", "/repositories/{repository}/branches/{branch}/objects", (*Server).deleteObject},
	{"POST", "/repositories/{repository}/branches/{branch}/objects/copy", (*Server).copyObject},
	{"GET", "/repositories/{repository}/refs/{ref}/objects", (*Server).getObject},
	{"HEAD", "/repositories/{repository}/refs/{ref}/objects", (*Server).getObject},
	{"GET", "/repositories/{repository}/refs/{ref}/objects/stat", (*Server).statObject},
	{"GET", "/repositories/{repository}/refs/{ref}/objects/ls", (*Server).listObjects},
	{"GET", "/repositories/{repository}/refs/{leftRef}/diff/{rightRef}", (*Server).diffRefs},
	{"GET", "/repositories/{repository}/branches/{branch}/diff", (*Server).diffBranch},
	{"POST", "/repositories/{repository}/refs/{sourceRef}/merge/{destinationBranch}", (*Server).merge},
	{"GET", "/repositories/{repository}/refs/{sourceRef}/merge/{destinationBranch}", (*Server).findMergeBase},
	{"POST", "/repositories/{repository}/branches/{branch}/revert", (*Server).revert},
	{"GET", "/config", (*Server).getConfig},
	{"GET", "/repositories/{repository}/branches/{branch}/staging/backing", (*Server).getPhysicalAddress},
	{"PUT", "/repositories/{repository}/branches/{branch}/staging/backing", (*Server).linkPhysicalAddress},
}

// match matches an escaped API path against a template and returns the
// unescaped parameters; ok is false when the path does not fit.
func match(template, escaped string) (params map[string]string, ok bool, err error) {
	ts, ps := strings.Split(template, "/"), strings.Split(escaped, "/")
	if len(ts) != len(ps) {
		return nil, false, nil
	}
	for i, t := range ts {
		name, wild := strings.CutPrefix(t, "{")
		if !wild {
			if t != ps[i] {
				return nil, false, nil
			}
			continue
		}
		if ps[i] == "" {
			return nil, false, nil
		}
		v, uerr := url.PathUnescape(ps[i])
		if uerr != nil {
			err = fmt.Errorf("path segment %q: %v", ps[i], uerr)
		}
		if params == nil {
			params = map[string]string{}
		}
		params[strings.TrimSuffix(name, "}")] = v
	}
	return params, true, err
}

// route answers an authorized request for the API path api (escaped,
// without /api/v1).
func (s *Server) route(w http.ResponseWriter, r *http.Request, api string) {
	var allowed []string
	for _, rt := range routes {
		p, ok, err := match(rt.template, api)
		if !ok {
			continue
		}
		if rt.method != r.Method {
			allowed = append(allowed, rt.method)
			continue
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("%s %s: %v", r.Method, r.URL.Path, err))
			return
		}
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("%s %s: malformed query: %v", r.Method, r.URL.Path, err))
			return
		}
		if repo, ok := p["repository"]; ok && repo != s.repo {
			writeError(w, http.StatusNotFound, fmt.Sprintf("repository not found: %q (this server serves one repository, %q: open lakefs://%s)", repo, s.repo, s.repo))
			return
		}
		c := &call{w: w, r: r, p: p, q: q}
		if err := rt.handle(s, c); err != nil {
			fail(w, err)
		}
		return
	}
	if len(allowed) > 0 {
		slices.Sort(allowed)
		allowed = slices.Compact(allowed)
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("no endpoint %s %s: this path answers %s", r.Method, r.URL.Path, strings.Join(allowed, ", ")))
		return
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s: this server answers the part of the lakeFS API v1 that rlpipe's lakefs:// backend uses", r.Method, r.URL.Path))
}

// writePage answers one page of a listing. seq yields items in the order
// of their keys; items whose key is not past after are skipped (after
// empty: none), amount are returned, and one more is read to learn
// whether there are more.
func writePage[T, W any](c *call, seq iter.Seq2[T, error], key func(T) string, conv func(T) W, after string, amount int) error {
	out := make([]W, 0, min(amount, 64))
	more := false
	last := ""
	for v, err := range seq {
		if err != nil {
			return err
		}
		k := key(v)
		if after != "" && k <= after {
			continue
		}
		if len(out) == amount {
			more = true
			break
		}
		out = append(out, conv(v))
		last = k
	}
	return writeResults(c, out, more, last)
}

// writeResults answers a page of results.
func writeResults[W any](c *call, results []W, more bool, last string) error {
	p := lakefsapi.Page[W]{Pagination: lakefsapi.Pagination{HasMore: more, Results: len(results), MaxPerPage: maxPageSize}, Results: results}
	if more {
		p.Pagination.NextOffset = last
	}
	writeJSON(c.w, http.StatusOK, p)
	return nil
}
