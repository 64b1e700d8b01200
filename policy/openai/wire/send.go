package wire

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ErrTimeout is Send's error when no answer came within Call.Timeout.
var ErrTimeout = errors.New("no answer within the attempt's timeout")

// RequestError is Send's error when no request could be made (a method
// or URL net/http refuses): nothing was sent, and another attempt fails
// the same way.
type RequestError struct{ Err error }

func (e *RequestError) Error() string { return e.Err.Error() }
func (e *RequestError) Unwrap() error { return e.Err }

// Call is one attempt's request.
type Call struct {
	Method string
	URL    string
	// Body is sent as application/json; nil sends none.
	Body []byte
	// APIKey, when set, is sent as a bearer token.
	APIKey string
	// Timeout bounds the attempt, the answer's body included, whatever
	// the HTTP client's own timeout.
	Timeout time.Duration
	// MaxBody is how much of the answer's body is kept: Send reads up to
	// MaxBody+1 bytes, so a caller can tell a body that was cut.
	MaxBody int64
}

// Reply is the server's answer to an attempt.
type Reply struct {
	Status      int    // e.g. 503
	StatusText  string // e.g. "503 Service Unavailable"; the number when the server sent no text
	ContentType string // the Content-Type header
	Header      http.Header
	Body        []byte // at most MaxBody+1 bytes
}

// Send makes one attempt: it sends c with the JSON and bearer headers and
// reads the answer. An answer of any status is a Reply; the error is for
// no answer: ErrTimeout, a *RequestError, ctx's cause when ctx ended, or
// the transport's error (refused, reset, DNS) without net/http's copy of
// the URL.
func Send(ctx context.Context, hc *http.Client, c Call) (Reply, error) {
	actx, cancel := context.WithTimeoutCause(ctx, c.Timeout, ErrTimeout)
	defer cancel()
	var rd io.Reader
	if c.Body != nil {
		rd = bytes.NewReader(c.Body)
	}
	req, err := http.NewRequestWithContext(actx, c.Method, c.URL, rd)
	if err != nil {
		return Reply{}, &RequestError{err}
	}
	if c.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Reply{}, transportError(actx, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, c.MaxBody+1))
	if err != nil {
		return Reply{}, transportError(actx, err)
	}
	r := Reply{Status: resp.StatusCode, StatusText: resp.Status, ContentType: resp.Header.Get("Content-Type"), Header: resp.Header, Body: b}
	if r.StatusText == "" {
		r.StatusText = strconv.Itoa(resp.StatusCode)
	}
	return r, nil
}

// transportError is a failed exchange's error: ErrTimeout when the
// attempt's own deadline passed, else the transport's error without the
// URL (the caller names the endpoint; net/http's copy would show its
// query).
func transportError(actx context.Context, err error) error {
	if errors.Is(context.Cause(actx), ErrTimeout) {
		return ErrTimeout
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// BodyKind names a body by its Content-Type for an error message: "a
// text/html body", or "a body" without one.
func (r Reply) BodyKind() string {
	ct := r.ContentType
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	if ct = strings.TrimSpace(ct); ct != "" {
		return "a " + ct + " body"
	}
	return "a body"
}
