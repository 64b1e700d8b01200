package storeserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/internal/loopback"
)

// apiError is an answer other than 2xx: lakeFS's Error body, {"message"}.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

// errorf builds an apiError with a formatted message.
func errorf(status int, format string, a ...any) *apiError {
	return &apiError{status: status, msg: fmt.Sprintf(format, a...)}
}

// writeError writes lakeFS's error body.
func writeError(w http.ResponseWriter, status int, msg string) {
	if rec, ok := w.(*loopback.Recorder); ok {
		rec.Message = msg
	}
	writeJSON(w, status, struct {
		Message string `json:"message"`
	}{msg})
}

// writeJSON writes v as the JSON body of an answer. A v that does not
// encode (a NaN, say) is answered with a 500 that says so, not with a
// truncated body under status. The error body holds only a string, which
// always encodes, so writeError's own writeJSON call succeeds.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		writeError(w, http.StatusInternalServerError, "encode the answer: "+err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body.Bytes())
}

// fail answers err: an *apiError as it is, an error of the store with the
// status lakeFS gives that kind of error (see statusOf).
func fail(w http.ResponseWriter, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		writeError(w, ae.status, ae.msg)
		return
	}
	status, phrase := statusOf(err)
	writeError(w, status, message(status, phrase, err.Error()))
}

// statusOf maps an error of the store to the status lakeFS answers for it
// and a phrase naming the kind. The lakefs:// backend reads the status,
// and for some statuses words of the message, to pick the named error
// again (artifacts/lakefs/errors.go), so the phrases below are chosen for
// it: "branch not found" on a 404 is ErrBranchNotFound, "no changes" on a
// 400 is ErrNoChanges, "uncommitted" on a 409 is ErrDirtyBranch.
func statusOf(err error) (int, string) {
	switch {
	case errors.Is(err, artifacts.ErrUnauthorized):
		return http.StatusUnauthorized, "unauthorized"
	case errors.Is(err, artifacts.ErrRepositoryNotFound):
		return http.StatusNotFound, "repository not found"
	case errors.Is(err, artifacts.ErrAmbiguousRef):
		// A 404 saying "ambiguous" is ErrAmbiguousRef to the client.
		return http.StatusNotFound, "ambiguous ref"
	case errors.Is(err, artifacts.ErrReadOnlyRef):
		// As lakeFS: a write addressed to a tag or a commit finds no
		// branch. The client then resolves the ref and reports
		// ErrReadOnlyRef, as the store itself does.
		return http.StatusNotFound, "branch not found"
	case errors.Is(err, artifacts.ErrBranchNotFound):
		return http.StatusNotFound, "branch not found"
	case errors.Is(err, artifacts.ErrTagNotFound):
		return http.StatusNotFound, "tag not found"
	case errors.Is(err, artifacts.ErrCommitNotFound):
		return http.StatusNotFound, "commit not found"
	case errors.Is(err, artifacts.ErrRefNotFound):
		return http.StatusNotFound, "ref not found"
	case errors.Is(err, artifacts.ErrObjectNotFound):
		return http.StatusNotFound, "object not found"
	case errors.Is(err, artifacts.ErrNotFound):
		return http.StatusNotFound, "not found"
	case errors.Is(err, artifacts.ErrObjectExists):
		return http.StatusPreconditionFailed, "object exists"
	case errors.Is(err, artifacts.ErrExists):
		// A branch or tag name another kind of ref holds is answered in
		// lakeFS's words where the kind is known (createBranch, createTag).
		return http.StatusConflict, "already exists"
	case errors.Is(err, artifacts.ErrNoChanges):
		return http.StatusBadRequest, "no changes"
	case errors.Is(err, artifacts.ErrDirtyBranch):
		return http.StatusConflict, "branch has uncommitted changes"
	case errors.Is(err, artifacts.ErrMergeConflict):
		return http.StatusConflict, "merge conflict"
	case errors.Is(err, artifacts.ErrConcurrentUpdate):
		// lakeFS answers 429 ("too many attempts") for a branch update
		// that lost to other writers; 409 would read as a merge conflict.
		return http.StatusTooManyRequests, "branch moved concurrently, retry"
	case errors.Is(err, artifacts.ErrProtected):
		return http.StatusForbidden, "protected branch"
	case errors.Is(err, artifacts.ErrConflict):
		return http.StatusConflict, "conflict"
	case errors.Is(err, artifacts.ErrInvalidRef):
		return http.StatusBadRequest, "invalid ref"
	case errors.Is(err, artifacts.ErrInvalid):
		return http.StatusBadRequest, "invalid argument"
	case errors.Is(err, artifacts.ErrNotSupported):
		return http.StatusNotImplemented, "not supported"
	case errors.Is(err, artifacts.ErrIntegrity):
		return http.StatusInternalServerError, "integrity check failed"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, "request cancelled"
	}
	return http.StatusInternalServerError, "internal error"
}

// signal is a class of message the lakefs:// backend tells apart by its
// words (artifacts/lakefs/errors.go, classify): a message is in the class
// if it holds one of any, and also when set, and starts with lead when set.
type signal struct {
	any        []string
	also, lead string
}

// signals lists, per status, the classes the backend checks, in the order
// it checks them: the first class a message is in decides the error.
var signals = map[int][]signal{
	http.StatusNotFound: {
		{any: []string{"repository not found"}}, {any: []string{"ambiguous"}},
		{any: []string{"branch not found"}}, {any: []string{"tag not found"}}, {any: []string{"commit not found"}},
	},
	http.StatusForbidden: {{any: []string{"protected branch", "default branch"}}},
	http.StatusConflict: {
		// A name clash, read only on creating a branch or a tag.
		{lead: "branch name ", any: []string{"conflict found"}}, {lead: "tag id ", any: []string{"conflict found"}},
		{any: []string{"uncommitted", "dirty"}},
	},
	http.StatusBadRequest: {{any: []string{"no changes"}}, {any: []string{"uncommitted", "dirty"}}, {any: []string{"ref"}}},
	http.StatusInternalServerError: {
		{any: []string{"locked", "predicate failed"}}, {any: []string{"required permissions"}},
		{any: []string{"invalid value"}, also: "ref"},
	},
}

// signalOf returns the index of the first class msg is in, or -1.
func signalOf(status int, msg string) int {
	msg = strings.ToLower(msg)
	for i, sig := range signals[status] {
		if sig.also != "" && !strings.Contains(msg, sig.also) || !strings.HasPrefix(msg, sig.lead) {
			continue
		}
		for _, w := range sig.any {
			if strings.Contains(msg, w) {
				return i
			}
		}
	}
	return -1
}

// message is the store's own words (detail), which name the artifact and
// the next step, led by phrase unless they hold it already. The detail is
// left out when it would move the message into another class than the
// phrase alone: a path named "uncommitted.txt" in a merge conflict must
// not turn the conflict into a dirty branch.
func message(status int, phrase, detail string) string {
	want := signalOf(status, phrase)
	var candidates []string
	if strings.Contains(strings.ToLower(detail), strings.ToLower(phrase)) {
		candidates = append(candidates, detail)
	}
	if detail != "" {
		candidates = append(candidates, phrase+": "+detail)
	}
	for _, msg := range candidates {
		if signalOf(status, msg) == want {
			return msg
		}
	}
	return phrase
}

// decodeJSON reads a JSON object from the request body into v. A body
// that does not parse is a 400 naming the byte where parsing stopped; a
// body larger than max is a 413. An empty body is an error unless
// optional, when v keeps its zero value.
func decodeJSON(r *http.Request, max int64, v any, optional bool) error {
	cr := &countingReader{r: io.LimitReader(r.Body, max+1)}
	dec := json.NewDecoder(cr)
	err := dec.Decode(v)
	if cr.n > max {
		return errorf(http.StatusRequestEntityTooLarge, "request body is larger than %d bytes", max)
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		if optional {
			return nil
		}
		return errorf(http.StatusBadRequest, "empty request body: send a JSON object")
	case errors.As(err, &syn):
		return errorf(http.StatusBadRequest, "malformed JSON body at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the body"
		}
		return errorf(http.StatusBadRequest, "malformed JSON body at byte %d: %s must be %s, not %s", typ.Offset, field, jsonKind(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, "malformed JSON body at byte %d: the body ends inside a JSON value", cr.n)
	default:
		return errorf(http.StatusBadRequest, "read request body: %v", err)
	}
	// Nothing but white space may follow the object.
	end := dec.InputOffset()
	rest := bufio.NewReader(io.MultiReader(dec.Buffered(), cr))
	for i := int64(1); ; i++ {
		b, err := rest.ReadByte()
		if err != nil {
			if cr.n > max {
				return errorf(http.StatusRequestEntityTooLarge, "request body is larger than %d bytes", max)
			}
			return nil
		}
		if b != ' ' && b != '\t' && b != '\r' && b != '\n' {
			return errorf(http.StatusBadRequest, "malformed JSON body at byte %d: unexpected data after the JSON object, which ends at byte %d", end+i, end)
		}
	}
}

// jsonKind names a Go kind as a JSON type.
func jsonKind(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	case "ptr":
		return "a value"
	}
	return "a number"
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
