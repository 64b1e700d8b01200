package storeserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
)

// errorBody is lakeFS's error answer.
type errorBody struct {
	Message string `json:"message"`
}

func messageOf(t *testing.T, body string) string {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q is not lakeFS's {\"message\"}: %v", body, err)
	}
	return e.Message
}

// TestBadInput sends requests the server must refuse and checks the
// status and the exact message of each answer.
func TestBadInput(t *testing.T) {
	_, url, _ := served(t)
	api := url + storeserver.APIBasePath
	repo := api + "/repositories/" + testRepo
	json := http.Header{"Content-Type": {"application/json"}}
	cases := []struct {
		name, method, url, body string
		header                  http.Header
		status                  int
		message                 string
	}{
		{"malformed JSON", "POST", repo + "/branches", `{"name": "x", "source": }`, json, 400,
			`malformed JSON body at byte 25: invalid character '}' looking for beginning of value`},
		{"JSON of the wrong type", "POST", repo + "/branches", `{"name": 5, "source": "main"}`, json, 400,
			`malformed JSON body at byte 10: name must be a string, not number`},
		{"JSON that is not an object", "POST", repo + "/tags", `["v1", "main"]`, json, 400,
			`malformed JSON body at byte 1: the body must be an object, not array`},
		{"truncated JSON", "POST", repo + "/branches", `{"name": "x"`, json, 400,
			`malformed JSON body at byte 12: the body ends inside a JSON value`},
		{"data after the JSON", "POST", repo + "/branches/main/commits", `{"message": "m"} junk`, json, 400,
			`malformed JSON body at byte 18: unexpected data after the JSON object, which ends at byte 16`},
		{"empty JSON body", "POST", repo + "/branches", "", json, 400,
			`empty request body: send a JSON object`},
		{"unknown endpoint", "GET", api + "/repositories/" + testRepo + "/nothing-here", "", nil, 404,
			`no endpoint GET /api/v1/repositories/served/nothing-here: this server answers the part of the lakeFS API v1 that rlpipe's lakefs:// backend uses`},
		{"path outside the API", "GET", url + "/index.html", "", nil, 404,
			`no endpoint GET /index.html: this server answers the lakeFS API under /api/v1`},
		{"method the path does not answer", "PATCH", repo + "/branches/main", "", nil, 405,
			`no endpoint PATCH /api/v1/repositories/served/branches/main: this path answers DELETE, GET, PUT`},
		{"unknown repository", "GET", api + "/repositories/other", "", nil, 404,
			`repository not found: "other" (this server serves one repository, "served": open lakefs://served)`},
		{"unknown repository under a path", "GET", api + "/repositories/other/branches/main", "", nil, 404,
			`repository not found: "other" (this server serves one repository, "served": open lakefs://served)`},
		{"unknown branch", "GET", repo + "/branches/nope", "", nil, 404,
			`branch "nope": branch not found`},
		{"unknown tag", "GET", repo + "/tags/v9", "", nil, 404,
			`tag "v9": tag not found`},
		{"unknown ref", "GET", repo + "/commits/nope", "", nil, 404,
			`resolve "nope": ref not found: no branch, tag or commit named "nope"`},
		{"unknown object", "GET", repo + "/refs/main/objects/stat?path=no/such", "", nil, 404,
			`main:no/such: object not found`},
		{"invalid branch name in the path", "GET", repo + "/branches/a%20b", "", nil, 400,
			`invalid branch name "a b" in GET /api/v1/repositories/served/branches/a b: use letters, digits, '_' and '-', starting with a letter, digit or '_'`},
		{"invalid branch name to create", "POST", repo + "/branches", `{"name": "a/b", "source": "main"}`, json, 400,
			`invalid branch name "a/b": use letters, digits, '_' and '-', starting with a letter, digit or '_'`},
		{"upload without a path", "POST", repo + "/branches/main/objects", "x", nil, 400,
			`POST /api/v1/repositories/served/branches/main/objects: missing query parameter "path"`},
		{"unknown reset type", "PUT", repo + "/branches/main", `{"type": "hard"}`, json, 400,
			`reset branch "main": type "hard": want reset or common_prefix`},
		{"unknown diff type", "GET", repo + "/refs/main/diff/main?type=four_dot", "", nil, 400,
			`diff main main: type "four_dot": want two_dot or three_dot`},
		{"bad page size", "GET", repo + "/branches?amount=many", "", nil, 400,
			`query parameter amount="many": want a whole number up to 1000`},
		{"bad merge strategy", "POST", repo + "/refs/main/merge/main", `{"strategy": "ours"}`, json, 400,
			`merge main into main: strategy "ours": want source-wins or dest-wins`},
		{"wrong credentials", "GET", repo, "", http.Header{"Authorization": {basic(testKey, "not-the-secret")}}, 401,
			`missing or wrong credentials: send HTTP Basic auth with the access key id and secret the server was started with (a worker sets LAKECTL_CREDENTIALS_ACCESS_KEY_ID and LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY to the values of RLPIPE_STORE_ACCESS_KEY_ID and RLPIPE_STORE_SECRET_ACCESS_KEY)`},
		{"no credentials", "GET", repo, "", http.Header{"Authorization": {"Bearer x"}}, 401,
			`missing or wrong credentials: send HTTP Basic auth with the access key id and secret the server was started with (a worker sets LAKECTL_CREDENTIALS_ACCESS_KEY_ID and LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY to the values of RLPIPE_STORE_ACCESS_KEY_ID and RLPIPE_STORE_SECRET_ACCESS_KEY)`},
		{"create another repository", "POST", api + "/repositories", `{"name": "other", "storage_namespace": "local://other"}`, json, 501,
			`not supported: this server serves one repository, "served", and cannot create "other"; open lakefs://served, or run ` + "`rlpipe store serve`" + ` on another store`},
		{"create the served repository", "POST", api + "/repositories", `{"name": "served", "storage_namespace": "local://served"}`, json, 409,
			`repository exists: "served" is the repository this server serves; open it as lakefs://served`},
		{"delete the repository", "DELETE", repo, "", nil, 501,
			`not supported: the store server does not delete the repository it serves; stop it and remove the store instead`},
		{"delete the default branch", "DELETE", repo + "/branches/main", "", nil, 403,
			`protected branch: delete branch "main": protected: it is the repository's default branch`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, header, body := do(t, c.method, c.url, c.body, c.header)
			if status != c.status {
				t.Fatalf("%s %s: status %d, want %d (body %s)", c.method, c.url, status, c.status, body)
			}
			if got := messageOf(t, body); got != c.message {
				t.Fatalf("%s %s: message\n got %q\nwant %q", c.method, c.url, got, c.message)
			}
			if ct := header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("%s %s: Content-Type %q, want application/json", c.method, c.url, ct)
			}
			if strings.Contains(body, testSecret) || strings.Contains(body, "not-the-secret") {
				t.Fatalf("%s %s: the answer echoes a secret: %s", c.method, c.url, body)
			}
			if status == http.StatusUnauthorized && header.Get("WWW-Authenticate") != `Basic realm="rlpipe store", charset="UTF-8"` {
				t.Fatalf("401 without a Basic challenge: %q", header.Get("WWW-Authenticate"))
			}
		})
	}
}

func basic(key, secret string) string {
	r, _ := http.NewRequest("GET", "http://x", nil)
	r.SetBasicAuth(key, secret)
	return r.Header.Get("Authorization")
}

// TestNameClash checks that a branch or tag named like a ref of the other
// kind is refused as lakeFS refuses it, 409 in lakeFS's words, and that
// the lakefs:// backend names the ref in the way: the store server is the
// project's lakeFS in tests, so it must not allow what lakeFS refuses.
func TestNameClash(t *testing.T) {
	backing, url, st := served(t)
	ctx := context.Background()
	if _, err := backing.CreateBranch(ctx, "dirty", "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := backing.CreateTag(ctx, "v1", "main"); err != nil {
		t.Fatal(err)
	}
	repo := url + storeserver.APIBasePath + "/repositories/" + testRepo
	cases := []struct{ name, path, body, message string }{
		// "dirty" reads like a dirty branch to the backend in other 409s.
		{"tag named like a branch", "/tags", `{"id": "dirty", "ref": "main"}`, "branch name dirty: conflict found"},
		{"tag named like the default branch", "/tags", `{"id": "main", "ref": "main"}`, "branch name main: conflict found"},
		{"branch named like a tag", "/branches", `{"name": "v1", "source": "main"}`, "tag ID v1: conflict found"},
	}
	for _, c := range cases {
		status, _, body := do(t, "POST", repo+c.path, c.body, nil)
		if status != http.StatusConflict || messageOf(t, body) != c.message {
			t.Errorf("%s: got %d %s, want 409 %q", c.name, status, body, c.message)
		}
	}

	_, err := st.CreateTag(ctx, "dirty", "main")
	want := `lakefs: create tag "dirty" at "main": branch exists: a branch named "dirty" exists; refs name one or the other (server: branch name dirty: conflict found)`
	if !errors.Is(err, artifacts.ErrBranchExists) || errors.Is(err, artifacts.ErrTagExists) || err.Error() != want {
		t.Errorf("create tag dirty beside branch dirty: got %v, want ErrBranchExists: %s", err, want)
	}
	_, err = st.CreateBranch(ctx, "v1", "main")
	want = `lakefs: create branch "v1" from "main": tag exists: a tag named "v1" exists; refs name one or the other (server: tag ID v1: conflict found)`
	if !errors.Is(err, artifacts.ErrTagExists) || errors.Is(err, artifacts.ErrBranchExists) || err.Error() != want {
		t.Errorf("create branch v1 beside tag v1: got %v, want ErrTagExists: %s", err, want)
	}
	// Nothing was created.
	if _, err := backing.GetTag(ctx, "dirty"); !errors.Is(err, artifacts.ErrTagNotFound) {
		t.Errorf("tag dirty after the refusal: %v", err)
	}
	if _, err := backing.GetBranch(ctx, "v1"); !errors.Is(err, artifacts.ErrBranchNotFound) {
		t.Errorf("branch v1 after the refusal: %v", err)
	}
}

// TestClientErrors checks that the lakefs:// backend, talking to the
// server, reports the same named errors the store reports directly.
func TestClientErrors(t *testing.T) {
	backing, url, st := served(t)
	ctx := context.Background()
	m := st // *lakefs.Store is a Merger and a Reverter
	put := func(branch, path, content string) {
		t.Helper()
		if _, err := st.PutObject(ctx, branch, path, strings.NewReader(content), nil); err != nil {
			t.Fatalf("put %s:%s: %v", branch, path, err)
		}
	}
	commit := func(branch string) artifacts.Commit {
		t.Helper()
		c, err := st.Commit(ctx, branch, "commit "+branch, nil)
		if err != nil {
			t.Fatalf("commit %s: %v", branch, err)
		}
		return c
	}
	put("main", "uncommitted.txt", "base")
	put("main", "x/branch not found", "odd path")
	commit("main")
	if _, err := st.CreateBranch(ctx, "feature", "main"); err != nil {
		t.Fatal(err)
	}
	put("feature", "uncommitted.txt", "feature")
	commit("feature")
	put("main", "uncommitted.txt", "main")
	commit("main")
	if _, err := st.CreateTag(ctx, "v1", "main"); err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		name string
		err  func() error
		want error
	}{
		{"get a missing branch", func() error { _, err := st.GetBranch(ctx, "nope"); return err }, artifacts.ErrBranchNotFound},
		{"get a missing tag", func() error { _, err := st.GetTag(ctx, "v9"); return err }, artifacts.ErrTagNotFound},
		{"get a missing commit", func() error {
			_, err := st.GetCommit(ctx, strings.Repeat("0", 64))
			return err
		}, artifacts.ErrCommitNotFound},
		{"resolve a missing ref", func() error { _, err := st.ResolveRef(ctx, "nope~1"); return err }, artifacts.ErrRefNotFound},
		{"stat a missing object", func() error { _, err := st.StatObject(ctx, "main", "no/such"); return err }, artifacts.ErrObjectNotFound},
		// The path holds words the backend reads in a 404's message.
		{"stat a missing object named like an error", func() error {
			_, err := st.StatObject(ctx, "main", "y/branch not found")
			return err
		}, artifacts.ErrObjectNotFound},
		{"put to a missing branch", func() error {
			_, err := st.PutObject(ctx, "nope", "a", strings.NewReader("a"), nil)
			return err
		}, artifacts.ErrBranchNotFound},
		{"put to a tag", func() error {
			_, err := st.PutObject(ctx, "v1", "a", strings.NewReader("a"), nil)
			return err
		}, artifacts.ErrReadOnlyRef},
		{"put over an object with IfAbsent", func() error {
			_, err := st.PutObject(ctx, "main", "uncommitted.txt", strings.NewReader("a"), &artifacts.PutOptions{IfAbsent: true})
			return err
		}, artifacts.ErrObjectExists},
		{"create an existing branch", func() error { _, err := st.CreateBranch(ctx, "feature", "main"); return err }, artifacts.ErrBranchExists},
		{"create an existing tag", func() error { _, err := st.CreateTag(ctx, "v1", "main"); return err }, artifacts.ErrTagExists},
		{"create a tag named like a branch", func() error { _, err := st.CreateTag(ctx, "feature", "main"); return err }, artifacts.ErrBranchExists},
		{"create a branch named like a tag", func() error { _, err := st.CreateBranch(ctx, "v1", "main"); return err }, artifacts.ErrTagExists},
		{"commit nothing", func() error { _, err := st.Commit(ctx, "main", "nothing", nil); return err }, artifacts.ErrNoChanges},
		{"merge nothing new", func() error { _, err := m.Merge(ctx, "main~1", "main", nil); return err }, artifacts.ErrNoChanges},
		{"resolve an ambiguous prefix", func() error { _, err := st.ResolveRef(ctx, ambiguousPrefix(t, backing)); return err }, artifacts.ErrAmbiguousRef},
	}
	for _, s := range steps {
		if err := s.err(); !errors.Is(err, s.want) {
			t.Errorf("%s: got %v, want %v", s.name, err, s.want)
		}
	}

	// A conflict on a path whose name reads like a dirty branch is still
	// a conflict, listing the path.
	_, err := m.Merge(ctx, "feature", "main", nil)
	var mc *artifacts.MergeConflictError
	if !errors.As(err, &mc) || len(mc.Paths) != 1 || mc.Paths[0] != "uncommitted.txt" {
		t.Fatalf("merge feature into main: got %v, want a conflict in uncommitted.txt", err)
	}
	put("main", "wip", "staged")
	if _, err := m.Merge(ctx, "feature", "main", nil); !errors.Is(err, artifacts.ErrDirtyBranch) {
		t.Fatalf("merge into a branch with staged changes: got %v, want ErrDirtyBranch", err)
	}
	if _, err := m.Revert(ctx, "main", "main", 1, nil); !errors.Is(err, artifacts.ErrDirtyBranch) {
		t.Fatalf("revert on a branch with staged changes: got %v, want ErrDirtyBranch", err)
	}

	// Wrong credentials, and a repository the server does not serve.
	c, err := lakefs.NewClient(lakefs.Config{Endpoint: url, AccessKeyID: testKey, SecretAccessKey: "wrong-secret"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = lakefs.Open(ctx, c, testRepo, nil)
	if !errors.Is(err, artifacts.ErrUnauthorized) || strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("open with a wrong secret: got %v, want ErrUnauthorized without the secret", err)
	}
	c, err = lakefs.NewClient(lakefs.Config{Endpoint: url, AccessKeyID: testKey, SecretAccessKey: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lakefs.Open(ctx, c, "other-repo", nil); !errors.Is(err, artifacts.ErrRepositoryNotFound) {
		t.Fatalf("open another repository: got %v, want ErrRepositoryNotFound", err)
	}
}

// ambiguousPrefix makes empty commits on a branch of its own until two
// commit ids share a first digit, and returns that digit.
func ambiguousPrefix(t *testing.T, st artifacts.Store) string {
	t.Helper()
	ctx := context.Background()
	if _, err := st.CreateBranch(ctx, "ambiguous", "main"); err != nil {
		t.Fatal(err)
	}
	seen := map[byte]bool{}
	for i := 0; ; i++ {
		c, err := st.Commit(ctx, "ambiguous", fmt.Sprint("empty ", i), &artifacts.CommitOptions{AllowEmpty: true})
		if err != nil {
			t.Fatal(err)
		}
		if seen[c.ID[0]] {
			return c.ID[:1]
		}
		seen[c.ID[0]] = true
	}
}

// TestEveryClientEndpoint sends every endpoint the lakefs:// backend
// uses (the table in artifacts/lakefs/stub_test.go) and checks that the
// server routes it: no answer says the endpoint is unknown.
func TestEveryClientEndpoint(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "lakefs", "stub_test.go"))
	if err != nil {
		t.Fatalf("read the client's endpoint table: %v", err)
	}
	row := regexp.MustCompile(`\{"(GET|POST|PUT|DELETE|HEAD)", "(/[^"]*)"`)
	rows := row.FindAllStringSubmatch(string(src), -1)
	if len(rows) < 20 {
		t.Fatalf("found %d endpoints in artifacts/lakefs/stub_test.go; the table changed shape", len(rows))
	}
	_, url, _ := served(t)
	values := map[string]string{"{repository}": testRepo, "{commitId}": "main"}
	param := regexp.MustCompile(`\{[A-Za-z]+\}`)
	for _, r := range rows {
		method, path := r[1], r[2]
		concrete := param.ReplaceAllStringFunc(path, func(p string) string {
			if v, ok := values[p]; ok {
				return v
			}
			return "main"
		})
		status, _, body := do(t, method, url+storeserver.APIBasePath+concrete+"?path=a&dest_path=b", "", nil)
		if status == http.StatusMethodNotAllowed || strings.Contains(body, "no endpoint") {
			t.Errorf("%s %s: the server does not route it: %d %s", method, path, status, body)
		}
	}
}

// coreOnly hides every ability beyond the core contract.
type coreOnly struct{ artifacts.Store }

// TestWithoutAbilities serves a store that cannot merge, revert, copy or
// read ranges: those endpoints answer 501 in lakeFS's shape, and a Range
// request gets the whole object.
func TestWithoutAbilities(t *testing.T) {
	backing := newLocal(t)
	url := serve(t, coreOnly{backing}, nil)
	repo := url + storeserver.APIBasePath + "/repositories/" + testRepo
	if _, err := backing.PutObject(context.Background(), "main", "a", strings.NewReader("0123456789"), nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, method, url, body, message string }{
		{"merge", "POST", repo + "/refs/main/merge/main", `{}`,
			`not supported: merge main into main: the store behind this server cannot merge (no artifacts.Merger)`},
		{"merge base", "GET", repo + "/refs/main/merge/main", "",
			`not supported: merge base of main and main: the store behind this server cannot merge (no artifacts.Merger)`},
		{"revert", "POST", repo + "/branches/main/revert", `{"ref": "main", "parent_number": 1}`,
			`not supported: revert main on branch "main": the store behind this server cannot revert (no artifacts.Reverter)`},
		{"copy", "POST", repo + "/branches/main/objects/copy?dest_path=b", `{"src_path": "a"}`,
			`not supported: copy to main:b: the store behind this server cannot link objects (no artifacts.Copier); read and upload the object instead`},
	}
	for _, c := range cases {
		status, _, body := do(t, c.method, c.url, c.body, nil)
		if status != http.StatusNotImplemented || messageOf(t, body) != c.message {
			t.Errorf("%s: got %d %s, want 501 %q", c.name, status, body, c.message)
		}
	}
	status, header, body := do(t, "GET", repo+"/refs/main/objects?path=a", "", http.Header{"Range": {"bytes=2-4"}})
	if status != http.StatusOK || body != "0123456789" || header.Get("Content-Range") != "" {
		t.Fatalf("range without RangeReader: got %d %q (Content-Range %q), want 200 with the whole object", status, body, header.Get("Content-Range"))
	}
	// The client cuts the range out of the whole object itself.
	rc, err := open(t, url, testKey, testSecret).GetObjectRange(context.Background(), "main", "a", 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var got bytes.Buffer
	if _, err := got.ReadFrom(rc); err != nil || got.String() != "234" {
		t.Fatalf("client range without RangeReader: got %q, %v, want 234", got.String(), err)
	}
}

// TestHealthcheckNeedsNoCredentials checks the one endpoint open to all.
func TestHealthcheckNeedsNoCredentials(t *testing.T) {
	_, url, _ := served(t)
	resp, err := http.Get(url + storeserver.APIBasePath + "/healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("GET /healthcheck without credentials: %d, want 204", resp.StatusCode)
	}
}

// TestWithoutCredentials serves on loopback with no credentials: requests
// need none, but must name a loopback host (no DNS rebinding).
func TestWithoutCredentials(t *testing.T) {
	backing := newLocal(t)
	url := serve(t, backing, &storeserver.Options{})
	st := open(t, url, "", "")
	if _, err := st.PutObject(context.Background(), "main", "a", strings.NewReader("a"), nil); err != nil {
		t.Fatalf("put without credentials: %v", err)
	}
	req, err := http.NewRequest("GET", url+storeserver.APIBasePath+"/repositories/"+testRepo, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "rebound.example:8001"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e errorBody
	_ = json.NewDecoder(resp.Body).Decode(&e)
	want := `host "rebound.example:8001" is not a loopback address: this server has no credentials, so it answers only http://127.0.0.1 or http://localhost (start it with RLPIPE_STORE_ACCESS_KEY_ID and RLPIPE_STORE_SECRET_ACCESS_KEY to serve other names)`
	if resp.StatusCode != http.StatusForbidden || e.Message != want {
		t.Fatalf("request for another host: %d %q, want 403 %q", resp.StatusCode, e.Message, want)
	}
}

// TestNew checks the options New refuses and the name it serves under.
func TestNew(t *testing.T) {
	ctx := context.Background()
	backing := newLocal(t)
	dotted := artifactstest.NewLocalNamed(t, ".rlpipe")
	cases := []struct {
		name string
		st   artifacts.Store
		opts *storeserver.Options
		want string // error message, or the repository served
	}{
		{"defaults", backing, nil, "served"},
		{"named", dotted, &storeserver.Options{Repository: "shared-runs"}, "shared-runs"},
		{"public address with credentials", backing, &storeserver.Options{Addr: "0.0.0.0:8001", AccessKeyID: "k", SecretAccessKey: "s"}, "served"},
		{"public address without credentials", backing, &storeserver.Options{Addr: "0.0.0.0:8001"},
			"storeserver: listen 0.0.0.0:8001: a store server bound to an address other than loopback needs credentials: set RLPIPE_STORE_ACCESS_KEY_ID and RLPIPE_STORE_SECRET_ACCESS_KEY (e.g. to $(openssl rand -hex 16) each), or bind 127.0.0.1"},
		{"every interface without credentials", backing, &storeserver.Options{Addr: ":8001"},
			"storeserver: listen :8001: a store server bound to an address other than loopback needs credentials: set RLPIPE_STORE_ACCESS_KEY_ID and RLPIPE_STORE_SECRET_ACCESS_KEY (e.g. to $(openssl rand -hex 16) each), or bind 127.0.0.1"},
		{"key without secret", backing, &storeserver.Options{AccessKeyID: "k"},
			"storeserver: invalid argument: set both the access key id and the secret access key (RLPIPE_STORE_ACCESS_KEY_ID and RLPIPE_STORE_SECRET_ACCESS_KEY), or neither"},
		{"store name that is no repository name", dotted, nil,
			`storeserver: serve the store as repository ".rlpipe": invalid argument: repository name ".rlpipe": use 3-63 lower-case letters, digits and '-' (name it with Options.Repository, ` + "`rlpipe store serve --repository NAME`)"},
		{"bad repository name", backing, &storeserver.Options{Repository: "Runs"},
			`storeserver: serve the store as repository "Runs": invalid argument: repository name "Runs": use 3-63 lower-case letters, digits and '-' (name it with Options.Repository, ` + "`rlpipe store serve --repository NAME`)"},
	}
	for _, c := range cases {
		srv, err := storeserver.New(ctx, c.st, c.opts)
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = srv.Repository()
		}
		if got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	if _, err := storeserver.New(ctx, backing, &storeserver.Options{Addr: "0.0.0.0:1"}); !errors.Is(err, storeserver.ErrNeedCredentials) {
		t.Errorf("public address without credentials: %v does not match ErrNeedCredentials", err)
	}
}

// TestListenOnLocalhost checks that a host name resolving to loopback
// needs no credentials.
func TestListenOnLocalhost(t *testing.T) {
	srv, err := storeserver.New(context.Background(), newLocal(t), &storeserver.Options{Addr: "localhost:0"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := srv.Listen(context.Background())
	if err != nil {
		t.Fatalf("listen on localhost without credentials: %v", err)
	}
	l.Close()
}

// TestOptionsHideCredentials prints options every way a log might.
func TestOptionsHideCredentials(t *testing.T) {
	o := storeserver.Options{Addr: "0.0.0.0:8001", AccessKeyID: testKey, SecretAccessKey: testSecret}
	for _, s := range []string{o.String(), fmt.Sprintf("%v", o), fmt.Sprintf("%+v", o), fmt.Sprintf("%#v", o), fmt.Sprintf("%v", &o)} {
		if strings.Contains(s, testKey) || strings.Contains(s, testSecret) {
			t.Fatalf("options print their credentials: %s", s)
		}
	}
	want := `storeserver.Options{Addr: "0.0.0.0:8001", AccessKeyID: "[redacted]", SecretAccessKey: "[redacted]", Repository: "", MaxJSONBytes: 0, ShutdownTimeout: 0s}`
	if got := o.String(); got != want {
		t.Fatalf("String() = %s, want %s", got, want)
	}
}
