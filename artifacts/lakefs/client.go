package lakefs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/internal/lakefsapi"
)

// Environment variables read by ConfigFromEnv. They are lakectl's, so a
// machine set up for lakectl works unchanged.
const (
	EnvEndpoint        = "LAKECTL_SERVER_ENDPOINT_URL"
	EnvAccessKeyID     = "LAKECTL_CREDENTIALS_ACCESS_KEY_ID"
	EnvSecretAccessKey = "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY"
	// EnvNamespace is the storage namespace prefix for repositories created
	// without Options.StorageNamespace: the repository lives at
	// $RLPIPE_LAKEFS_NAMESPACE/<repo>.
	EnvNamespace = "RLPIPE_LAKEFS_NAMESPACE"
)

// apiBasePath is where lakeFS serves its REST API.
const apiBasePath = "/api/v1"

// maxPageSize is the largest page lakeFS returns (the spec's PaginationAmount maximum).
const maxPageSize = 1000

// Config locates a lakeFS server and holds the credentials to talk to it.
// Its String and GoString methods hide the secret, so printing a Config is
// safe.
type Config struct {
	// Endpoint is the server URL, with or without the trailing /api/v1
	// (e.g. http://localhost:8000).
	Endpoint string
	// AccessKeyID and SecretAccessKey authenticate with HTTP Basic auth.
	// Both empty means no authentication header is sent.
	AccessKeyID     string
	SecretAccessKey string
	// HTTPClient sends the requests; nil means a client of its own (whose
	// idle connections Store.Close releases).
	HTTPClient *http.Client
	// PresignThreshold is the size in bytes above which objects are
	// uploaded and read through presigned URLs to the server's block
	// store, when the server offers them (see the package doc): 0 means
	// DefaultPresignThreshold, a negative value never.
	PresignThreshold int64
	// thresholdErr is a bad EnvPresignThreshold, reported by NewClient.
	thresholdErr error
}

// ConfigFromEnv reads the lakectl environment variables.
func ConfigFromEnv() Config {
	c := Config{
		Endpoint:        os.Getenv(EnvEndpoint),
		AccessKeyID:     os.Getenv(EnvAccessKeyID),
		SecretAccessKey: os.Getenv(EnvSecretAccessKey),
	}
	if v := os.Getenv(EnvPresignThreshold); v != "" {
		c.PresignThreshold, c.thresholdErr = parseThreshold(v)
	}
	return c
}

// String describes the configuration without the secret.
func (c Config) String() string {
	secret := ""
	if c.SecretAccessKey != "" {
		secret = "<redacted>"
	}
	return fmt.Sprintf("lakefs.Config{Endpoint: %q, AccessKeyID: %q, SecretAccessKey: %q}", c.Endpoint, c.AccessKeyID, secret)
}

// GoString is String, so that %#v does not print the secret either.
func (c Config) GoString() string { return c.String() }

// Client speaks the part of the lakeFS REST API (v1) that the store needs.
// It is safe for concurrent use.
type Client struct {
	base   string // scheme://host[:port]/…/api/v1, no trailing slash
	hc     *http.Client
	ownHC  bool
	key    string
	secret string
	log    zerolog.Logger
	// threshold is Config.PresignThreshold with the default filled in;
	// presign is what the server said of presigned transfers.
	threshold int64
	presign   *presignState
}

// NewClient checks cfg and returns a client for it. It sends no request.
func NewClient(cfg Config) (*Client, error) {
	base, err := normalizeEndpoint(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	if (cfg.AccessKeyID == "") != (cfg.SecretAccessKey == "") {
		return nil, fmt.Errorf("%w: lakefs: set both %s and %s, or neither", artifacts.ErrInvalid, EnvAccessKeyID, EnvSecretAccessKey)
	}
	if cfg.thresholdErr != nil {
		return nil, cfg.thresholdErr
	}
	threshold := cfg.PresignThreshold
	if threshold == 0 {
		threshold = DefaultPresignThreshold
	}
	c := &Client{base: base, hc: cfg.HTTPClient, key: cfg.AccessKeyID, secret: cfg.SecretAccessKey, log: zerolog.Nop(),
		threshold: threshold, presign: &presignState{}}
	if c.hc == nil {
		c.hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		c.ownHC = true
	}
	return c, nil
}

// String describes the client without its credentials.
func (c *Client) String() string { return "lakefs.Client{" + c.base + "}" }

// GoString is String, so that %#v does not print the secret.
func (c *Client) GoString() string { return c.String() }

// Endpoint returns the API base URL the client sends requests to.
func (c *Client) Endpoint() string { return c.base }

// withLogger returns a shallow copy of c that logs to l.
func (c *Client) withLogger(l zerolog.Logger) *Client {
	cp := *c
	cp.log = l
	return &cp
}

// closeIdle releases idle connections of a client this package created.
func (c *Client) closeIdle() {
	if c.ownHC {
		c.hc.CloseIdleConnections()
	}
}

func normalizeEndpoint(endpoint string) (string, error) {
	if endpoint == "" {
		return "", fmt.Errorf("%w: lakefs: no server endpoint: set %s (e.g. http://localhost:8000)", artifacts.ErrInvalid, EnvEndpoint)
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		// url.Parse quotes the input, which may hold credentials: do not wrap err.
		return "", fmt.Errorf("%w: lakefs: %s is not a URL", artifacts.ErrInvalid, EnvEndpoint)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("%w: lakefs: endpoint %q: want http(s)://host[:port][/api/v1]", artifacts.ErrInvalid, u.Redacted())
	}
	if u.User != nil {
		return "", fmt.Errorf("%w: lakefs: endpoint %q carries credentials: put them in %s and %s instead", artifacts.ErrInvalid, u.Redacted(), EnvAccessKeyID, EnvSecretAccessKey)
	}
	u.RawQuery, u.Fragment, u.RawPath = "", "", ""
	u.Path = strings.TrimRight(u.Path, "/")
	if !strings.HasSuffix(u.Path, apiBasePath) {
		u.Path += apiBasePath
	}
	return u.String(), nil
}

// apiError is a non-2xx answer from the server.
type apiError struct {
	Status  int
	Message string
}

func (e *apiError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("server answered %d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("server answered %d: %s", e.Status, e.Message)
}

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 16 << 10

// readAPIError turns an error response into an *apiError, closing its body.
func readAPIError(resp *http.Response) *apiError {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &apiError{Status: resp.StatusCode}
	var body struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &body) == nil {
		e.Message = body.Message
	} else {
		// Not lakeFS's JSON: a proxy's page, say. Keep its start.
		e.Message = strings.TrimSpace(string(b))
		if len(e.Message) > maxErrorText {
			e.Message = strings.ToValidUTF8(e.Message[:maxErrorText], "") + "…"
		}
	}
	return e
}

// maxErrorText bounds the part of a non-JSON error body put in a message.
const maxErrorText = 512

// pathOf joins escaped path segments under the API base.
func pathOf(segments ...string) string {
	var b strings.Builder
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// request describes one call.
type request struct {
	method string
	path   string // from pathOf
	query  url.Values
	header http.Header
	body   io.Reader
	// length is the body length, or -1 when unknown (chunked upload).
	length int64
}

// Transient failures are retried: a request that never reached the
// server (the connection was refused, as while lakeFS restarts) in any
// method whose body can be replayed, and a 502, 503 or 504 answer to a
// read. At most retryTries sends, waiting retryWait, doubled up to 5 s,
// between them (about 20 s in all); each retry is logged at warn.
var (
	retryTries = 6
	retryWait  = 300 * time.Millisecond
)

// do sends r and returns the response when its status is 2xx; otherwise
// an *apiError. The caller closes the body. Transient failures are
// retried (retryTries).
func (c *Client) do(ctx context.Context, r request) (*http.Response, error) {
	wait := retryWait
	// A body that can seek is sent again from where it started.
	seeker, _ := r.body.(io.Seeker)
	var start int64
	if seeker != nil {
		var err error
		if start, err = seeker.Seek(0, io.SeekCurrent); err != nil {
			seeker = nil
		}
	}
	for try := 1; ; try++ {
		resp, err := c.send(ctx, r)
		again := try < retryTries && ctx.Err() == nil && transient(r, seeker != nil, resp, err)
		if !again {
			if err == nil && (resp.StatusCode < 200 || resp.StatusCode > 299) {
				return nil, readAPIError(resp)
			}
			return resp, err
		}
		if resp != nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if seeker != nil {
			if _, serr := seeker.Seek(start, io.SeekStart); serr != nil {
				return nil, err
			}
		}
		ev := c.log.Warn().Str("method", r.method).Str("path", r.path).Int("try", try).Dur("wait", wait)
		if err != nil {
			ev = ev.Err(err)
		} else {
			ev = ev.Int("status", resp.StatusCode)
		}
		ev.Msg("lakefs request failed transiently; sending it again")
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// transient reports whether a send may be repeated: it never reached the
// server and its body can be sent again (none, empty, or one that
// seeks), or it is a read the server could not serve for now.
func transient(r request, seeks bool, resp *http.Response, err error) bool {
	replayable := r.body == nil || r.length == 0 || seeks
	if err != nil {
		var op *net.OpError
		return replayable && errors.As(err, &op) && op.Op == "dial"
	}
	read := r.method == http.MethodGet || r.method == http.MethodHead
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return read
	}
	return false
}

// send sends r once.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	body := r.body
	switch body.(type) {
	case nil:
		body = http.NoBody
	case io.Closer:
		// The transport closes a body it is given, even when the send
		// fails; the caller owns this one, and a retry sends it again.
		body = io.NopCloser(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, err
	}
	if r.body != nil {
		req.ContentLength = r.length
		if r.length == 0 {
			req.Body = http.NoBody
		}
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	if c.key != "" {
		req.SetBasicAuth(c.key, c.secret)
	}
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		c.log.Debug().Str("method", r.method).Str("path", r.path).Err(err).Msg("lakefs request failed")
		return nil, err
	}
	c.log.Debug().Str("method", r.method).Str("path", r.path).Int("status", resp.StatusCode).
		Dur("elapsed", time.Since(start)).Msg("lakefs request")
	return resp, nil
}

// jsonRequest builds a request whose body is in as JSON.
func jsonRequest(method, path string, in any) (request, error) {
	r := request{method: method, path: path}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return request{}, err
		}
		r.body, r.length = bytes.NewReader(b), int64(len(b))
		r.header = http.Header{"Content-Type": {"application/json"}}
	}
	return r, nil
}

// call sends a request with an optional JSON body and decodes an optional
// JSON answer into out.
func (c *Client) call(ctx context.Context, method, path string, query url.Values, in, out any) error {
	r, err := jsonRequest(method, path, in)
	if err != nil {
		return err
	}
	r.query = query
	resp, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	defer drain(resp.Body)
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s %s answer: %w", method, path, err)
	}
	return nil
}

// drain reads what is left of a small answer (a JSON document's trailing
// newline) and closes it, so that the connection can be reused.
func drain(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxErrorBody))
	_ = body.Close()
}

// paginate walks a listing endpoint page by page, passing after and amount
// and following pagination.next_offset while pagination.has_more. amount
// is the page size (clamped to 1..1000); query is not modified.
func paginate[T any](ctx context.Context, c *Client, path string, query url.Values, amount int) iter.Seq2[T, error] {
	if amount <= 0 || amount > maxPageSize {
		amount = maxPageSize
	}
	return func(yield func(T, error) bool) {
		var zero T
		q := url.Values{}
		for k, v := range query {
			q[k] = v
		}
		q.Set("amount", strconv.Itoa(amount))
		after := q.Get("after")
		for {
			if after != "" {
				q.Set("after", after)
			}
			var p lakefsapi.Page[T]
			if err := c.call(ctx, http.MethodGet, path, q, nil, &p); err != nil {
				yield(zero, err)
				return
			}
			for _, v := range p.Results {
				if !yield(v, nil) {
					return
				}
			}
			if !p.Pagination.HasMore {
				return
			}
			if p.Pagination.NextOffset == "" || p.Pagination.NextOffset == after {
				yield(zero, errors.New("server reported more results but gave no new next_offset"))
				return
			}
			after = p.Pagination.NextOffset
		}
	}
}
