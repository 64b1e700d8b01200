package lakefs

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// endpoints lists every (method, path template) the client sends, in the
// OpenAPI document's spelling. The stub refuses requests outside it and
// spec_test.go checks it against the document when that is at hand.
var endpoints = []struct {
	method, path string
	// query and header parameters the client sends to this endpoint
	params []string
}{
	{"POST", "/repositories", nil},
	{"GET", "/repositories/{repository}", nil},
	{"DELETE", "/repositories/{repository}", nil},
	{"GET", "/repositories/{repository}/branches", []string{"after", "amount"}},
	{"POST", "/repositories/{repository}/branches", nil},
	{"GET", "/repositories/{repository}/branches/{branch}", nil},
	{"DELETE", "/repositories/{repository}/branches/{branch}", nil},
	{"PUT", "/repositories/{repository}/branches/{branch}", nil},
	{"GET", "/repositories/{repository}/tags", []string{"after", "amount"}},
	{"POST", "/repositories/{repository}/tags", nil},
	{"GET", "/repositories/{repository}/tags/{tag}", nil},
	{"DELETE", "/repositories/{repository}/tags/{tag}", nil},
	{"GET", "/repositories/{repository}/refs/{ref}/commits", []string{"after", "amount", "objects", "prefixes", "first_parent", "limit"}},
	{"GET", "/repositories/{repository}/commits/{commitId}", nil},
	{"POST", "/repositories/{repository}/branches/{branch}/commits", nil},
	{"POST", "/repositories/{repository}/branches/{branch}/objects", []string{"path", "If-None-Match"}},
	{"DELETE", "/repositories/{repository}/branches/{branch}/objects", []string{"path"}},
	{"POST", "/repositories/{repository}/branches/{branch}/objects/copy", []string{"dest_path"}},
	{"GET", "/repositories/{repository}/refs/{ref}/objects", []string{"path", "Range"}},
	{"GET", "/repositories/{repository}/refs/{ref}/objects/stat", []string{"path", "user_metadata", "presign"}},
	{"GET", "/repositories/{repository}/refs/{ref}/objects/ls", []string{"after", "amount", "prefix", "delimiter", "user_metadata"}},
	{"GET", "/repositories/{repository}/refs/{leftRef}/diff/{rightRef}", []string{"after", "amount", "prefix", "type"}},
	{"GET", "/repositories/{repository}/branches/{branch}/diff", []string{"after", "amount"}},
	{"POST", "/repositories/{repository}/refs/{sourceRef}/merge/{destinationBranch}", nil},
	{"GET", "/repositories/{repository}/refs/{sourceRef}/merge/{destinationBranch}", nil},
	{"POST", "/repositories/{repository}/branches/{branch}/revert", nil},
	{"GET", "/config", nil},
	{"GET", "/repositories/{repository}/branches/{branch}/staging/backing", []string{"path", "presign"}},
	{"PUT", "/repositories/{repository}/branches/{branch}/staging/backing", []string{"path", "If-None-Match"}},
}

// knownEndpoint reports whether an (unescaped) API path matches a template
// of the table.
func knownEndpoint(method, path string) bool {
	for _, e := range endpoints {
		if e.method == method && matchTemplate(e.path, path) {
			return true
		}
	}
	return false
}

// matchTemplate matches a path against a template whose {name} segments
// stand for one path segment.
func matchTemplate(template, path string) bool {
	ts, ps := strings.Split(template, "/"), strings.Split(path, "/")
	if len(ts) != len(ps) {
		return false
	}
	for i := range ts {
		if strings.HasPrefix(ts[i], "{") {
			if ps[i] == "" {
				return false
			}
		} else if ts[i] != ps[i] {
			return false
		}
	}
	return true
}

// stub is a hand-written lakeFS server: tests register handlers with
// ServeMux patterns under /api/v1 and read back the requests it saw.
type stub struct {
	t   *testing.T
	mux *http.ServeMux
	srv *httptest.Server

	mu    sync.Mutex
	seen  []*http.Request
	conns int // connections opened by clients
}

func newStub(t *testing.T) *stub {
	t.Helper()
	s := &stub{t: t, mux: http.NewServeMux()}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api, ok := strings.CutPrefix(r.URL.Path, apiBasePath)
		if !ok || !knownEndpoint(r.Method, api) {
			t.Errorf("stub: %s %s is not in the endpoint table", r.Method, r.URL.Path)
		}
		s.mu.Lock()
		s.seen = append(s.seen, r.Clone(r.Context()))
		s.mu.Unlock()
		s.mux.ServeHTTP(w, r)
	}))
	s.srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

// handle registers h for a pattern such as "GET /repositories/{repo}".
// A pattern without a method ("/") matches every request.
func (s *stub) handle(pattern string, h http.HandlerFunc) {
	if method, path, ok := strings.Cut(pattern, " "); ok {
		s.mux.HandleFunc(method+" "+apiBasePath+path, h)
		return
	}
	s.mux.HandleFunc(apiBasePath+pattern, h)
}

// requests returns "METHOD path?query" for every request seen.
func (s *stub) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.seen {
		line := r.Method + " " + strings.TrimPrefix(r.URL.Path, apiBasePath)
		if r.URL.RawQuery != "" {
			line += "?" + r.URL.RawQuery
		}
		out = append(out, line)
	}
	return out
}

// lastRequest returns the last request seen.
func (s *stub) lastRequest() *http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) == 0 {
		s.t.Fatalf("stub: no request seen")
	}
	return s.seen[len(s.seen)-1]
}

const (
	testKey    = "AKIAIOSFODNN7EXAMPLE"
	testSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	testRepo   = "rlpipe-test"
)

// client returns a client for the stub with test credentials.
func (s *stub) client() *Client {
	s.t.Helper()
	c, err := NewClient(Config{Endpoint: s.srv.URL, AccessKeyID: testKey, SecretAccessKey: testSecret})
	if err != nil {
		s.t.Fatalf("new client: %v", err)
	}
	s.t.Cleanup(c.closeIdle)
	return c
}

// store returns a store on repository testRepo whose default branch is
// main, without asking the stub.
func (s *stub) store() *Store {
	return &Store{c: s.client(), repo: testRepo, defaultBranch: "main"}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func decodeJSON(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"message": msg})
}

// commitJSON is a commit as the server would send it.
func commitJSON(id string, parents ...string) map[string]any {
	if parents == nil {
		parents = []string{}
	}
	return map[string]any{
		"id": id, "parents": parents, "committer": "admin", "message": "msg " + id[60:],
		"creation_date": 1700000000, "meta_range_id": "mr", "metadata": map[string]string{}, "generation": 1,
	}
}

// cid makes a full commit id ending in the hex digits tag.
func cid(tag string) string {
	return strings.Repeat("0", 64-len(tag)) + tag
}
