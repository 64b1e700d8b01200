package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// Bounds of the API's pages.
const (
	defaultLogLimit   = 50
	maxLogLimit       = 1000
	defaultTableLimit = 100
	maxTableLimit     = 1000
	maxListEntries    = 5000
	// maxObjectText is the most of a non-table object /api/object returns.
	maxObjectText = 1 << 20
)

// apiError is the body of every error the API returns.
type apiError struct {
	Error  string `json:"error"`
	Status int    `json:"status"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// An apiError holds a string and an int: this call encodes.
		writeError(w, http.StatusInternalServerError, "encode the response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, apiError{Error: msg, Status: status})
}

// fail answers with the status the store error calls for: 404 for what
// does not exist, 400 for a malformed argument, 504 when the request ran
// out of time, 500 otherwise.
func fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, artifacts.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, artifacts.ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, context.DeadlineExceeded):
		status = http.StatusGatewayTimeout
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		return // the client left
	}
	writeError(w, status, err.Error())
}

// answer is a JSON endpoint: its value is written with 200 OK, its error
// with the status fail picks.
type answer func(r *http.Request) (any, error)

func (a answer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v, err := a(r)
	if err != nil {
		fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// kindError is a message for the user that matches a store error kind
// (artifacts.ErrNotFound, artifacts.ErrInvalid) without repeating its text.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

func kindf(kind error, format string, a ...any) error {
	return &kindError{msg: fmt.Sprintf(format, a...), kind: kind}
}

// badRequest is an invalid argument (400).
func badRequest(format string, a ...any) error { return kindf(artifacts.ErrInvalid, format, a...) }

// noRun is the error for a run that is not in the store (404).
func noRun(run, branch string) error {
	return kindf(artifacts.ErrBranchNotFound, "no run %q in this store (no branch %s); /api/runs lists the runs", run, branch)
}

// pageParams reads ?offset= and ?limit= (default def, at most max; 0
// means def).
func pageParams(r *http.Request, def, max int) (offset, limit int, err error) {
	if offset, err = intParam(r, "offset", 0, 0); err != nil {
		return 0, 0, err
	}
	if limit, err = intParam(r, "limit", def, max); err != nil {
		return 0, 0, err
	}
	if limit == 0 {
		limit = def
	}
	return offset, limit, nil
}

// intParam reads a non-negative integer query parameter, def when absent.
func intParam(r *http.Request, name string, def, max int) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, badRequest("%s=%q: use a whole number ≥ 0", name, s)
	}
	if max > 0 && n > max {
		return 0, badRequest("%s=%d: at most %d", name, n, max)
	}
	return n, nil
}

// refParam reads a required ref parameter and checks that it parses.
func refParam(r *http.Request) (string, error) {
	ref := r.URL.Query().Get("ref")
	if ref == "" {
		return "", badRequest("missing ref: add ?ref=BRANCH, a tag or a commit id")
	}
	if _, err := artifacts.ParseRef(ref); err != nil {
		return "", err
	}
	return ref, nil
}

// objectParams reads the required ref and path parameters of an object.
func objectParams(r *http.Request) (ref, path string, err error) {
	if ref, err = refParam(r); err != nil {
		return "", "", err
	}
	path = r.URL.Query().Get("path")
	if err := artifacts.ValidatePath(path); err != nil {
		return "", "", err
	}
	return ref, path, nil
}

func (s *Server) apiRuns(r *http.Request) (any, error) {
	runs, err := listRuns(r.Context(), s.st)
	if err != nil {
		return nil, err
	}
	return map[string]any{"runs": runs}, nil
}

func (s *Server) apiRun(r *http.Request) (any, error) {
	return s.runDetail(r.Context(), r.PathValue("run"))
}

func (s *Server) apiRescoring(r *http.Request) (any, error) {
	return s.rescoreCurves(r.Context(), r.PathValue("run"), r.PathValue("branch"))
}

func (s *Server) apiIteration(r *http.Request) (any, error) {
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 1 {
		return nil, badRequest("iteration %q: use a number from 1", r.PathValue("n"))
	}
	return s.iterationDetail(r.Context(), r.PathValue("run"), n)
}

// BranchOut is one branch of /api/branches with its head commit.
type BranchOut struct {
	Name    string    `json:"name"`
	Commit  string    `json:"commit"`
	Date    time.Time `json:"date"`
	Message string    `json:"message"`
	Default bool      `json:"default,omitempty"`
}

func (s *Server) apiBranches(r *http.Request) (any, error) {
	ctx := r.Context()
	repo, err := s.st.Repository(ctx)
	if err != nil {
		return nil, err
	}
	out := struct {
		Repository artifacts.Repository `json:"repository"`
		Branches   []BranchOut          `json:"branches"`
		Tags       []artifacts.Tag      `json:"tags"`
	}{Repository: repo, Branches: []BranchOut{}, Tags: []artifacts.Tag{}}
	for b, err := range s.st.ListBranches(ctx) {
		if err != nil {
			return nil, fmt.Errorf("list branches: %w", err)
		}
		row := BranchOut{Name: b.Name, Commit: b.CommitID, Default: b.Name == repo.DefaultBranch}
		if c, err := s.st.GetCommit(ctx, b.CommitID); err == nil {
			row.Date, row.Message = c.CreationDate.UTC(), firstLine(c.Message)
		}
		out.Branches = append(out.Branches, row)
	}
	for t, err := range s.st.ListTags(ctx) {
		if err != nil {
			return nil, fmt.Errorf("list tags: %w", err)
		}
		out.Tags = append(out.Tags, t)
	}
	return out, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// apiLog pages through history from ref, newest first: ?offset= skips
// commits, ?limit= caps the page; next_offset is set when more follow.
func (s *Server) apiLog(r *http.Request) (any, error) {
	ref, err := refParam(r)
	if err != nil {
		return nil, err
	}
	offset, limit, err := pageParams(r, defaultLogLimit, maxLogLimit)
	if err != nil {
		return nil, err
	}
	out := struct {
		Ref        string             `json:"ref"`
		Offset     int                `json:"offset"`
		Commits    []artifacts.Commit `json:"commits"`
		NextOffset *int               `json:"next_offset,omitempty"`
	}{Ref: ref, Offset: offset, Commits: []artifacts.Commit{}}
	i := 0
	for c, err := range s.st.Log(r.Context(), ref, &artifacts.LogOptions{Limit: offset + limit + 1}) {
		if err != nil {
			return nil, fmt.Errorf("log %s: %w", ref, err)
		}
		switch {
		case i < offset:
		case i < offset+limit:
			c.CreationDate = c.CreationDate.UTC()
			out.Commits = append(out.Commits, c)
		default:
			next := offset + limit
			out.NextOffset = &next
		}
		i++
	}
	return out, nil
}

// apiList lists one level of a ref's tree: ?ref=&prefix=dir/.
func (s *Server) apiList(r *http.Request) (any, error) {
	ref, err := refParam(r)
	if err != nil {
		return nil, err
	}
	prefix := r.URL.Query().Get("prefix")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	out := struct {
		Ref       string            `json:"ref"`
		Prefix    string            `json:"prefix"`
		Entries   []artifacts.Entry `json:"entries"`
		Truncated bool              `json:"truncated,omitempty"`
	}{Ref: ref, Prefix: prefix, Entries: []artifacts.Entry{}}
	for e, err := range s.st.ListObjects(r.Context(), ref, &artifacts.ListOptions{Prefix: prefix, Delimiter: "/", Limit: maxListEntries + 1}) {
		if err != nil {
			return nil, fmt.Errorf("list %s:%s: %w", ref, prefix, err)
		}
		if len(out.Entries) == maxListEntries {
			out.Truncated = true
			break
		}
		out.Entries = append(out.Entries, e)
	}
	return out, nil
}

// apiObject returns a small non-table object as text (configs, metrics,
// event logs): the first MiB, and whether it is binary.
func (s *Server) apiObject(r *http.Request) (any, error) {
	ref, path, err := objectParams(r)
	if err != nil {
		return nil, err
	}
	rc, info, err := s.st.GetObject(r.Context(), ref, path)
	if err != nil {
		return nil, readErr(err, ref, path)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxObjectText))
	if err != nil {
		return nil, fmt.Errorf("read %s:%s: %w", ref, path, err)
	}
	out := struct {
		Ref         string `json:"ref"`
		Path        string `json:"path"`
		Size        int64  `json:"size_bytes"`
		Checksum    string `json:"checksum"`
		ContentType string `json:"content_type,omitempty"`
		Text        string `json:"text"`
		Binary      bool   `json:"binary,omitempty"`
		Truncated   bool   `json:"truncated,omitempty"`
	}{Ref: ref, Path: path, Size: info.Size, Checksum: info.Checksum, ContentType: info.ContentType, Truncated: info.Size > int64(len(b))}
	if !utf8.Valid(trimPartialRune(b)) || strings.ContainsRune(string(b), 0) {
		out.Binary = true
	} else {
		out.Text = string(b)
	}
	return out, nil
}

// trimPartialRune drops a UTF-8 sequence cut by the read limit.
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if utf8.Valid(b) {
			return b
		}
		b = b[:len(b)-1]
	}
	return b
}

func (s *Server) apiTable(r *http.Request) (any, error) {
	ref, path, err := objectParams(r)
	if err != nil {
		return nil, err
	}
	offset, limit, err := pageParams(r, defaultTableLimit, maxTableLimit)
	if err != nil {
		return nil, err
	}
	page, err := readTablePage(r.Context(), s.st, ref, path, offset, limit)
	if err != nil {
		return nil, err
	}
	return page, nil
}

// tableName is the rlpipe table recorded in a Parquet file, for display.
func tableName(f *tables.File) string {
	name, v := f.Table()
	if name == "" {
		return ""
	}
	return fmt.Sprintf("%s v%d", name, v)
}

// readErr says which object could not be read, unless the store's error
// already does.
func readErr(err error, ref, path string) error {
	if strings.Contains(err.Error(), ref+":"+path) {
		return err
	}
	return fmt.Errorf("read %s:%s: %w", ref, path, err)
}
