package lakefs

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/internal/lakefsapi"
)

// EnvPresignThreshold sets Config.PresignThreshold from the environment:
// a size in bytes, with an optional unit (KiB, MiB, GiB; K, M, G mean the
// same), or "off".
const EnvPresignThreshold = "RLPIPE_LAKEFS_PRESIGN_THRESHOLD"

// DefaultPresignThreshold is the size above which objects move through
// presigned URLs when Config.PresignThreshold is zero.
const DefaultPresignThreshold = 32 << 20

// ErrPresignedTransfer is a transfer to or from a presigned URL that the
// block store refused or that failed on the way (an expired URL, a
// signature refused, a connection cut). Its message names the object and
// the block store's scheme and host, never the URL's path or query,
// which hold the signature. The store then moves the object through the
// lakeFS API instead, and logs the error at warn.
var ErrPresignedTransfer = errors.New("presigned transfer failed")

// parseThreshold reads EnvPresignThreshold's value.
func parseThreshold(v string) (int64, error) {
	s := strings.TrimSpace(v)
	if strings.EqualFold(s, "off") {
		return -1, nil
	}
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%w: lakefs: %s=%q: want a size in bytes such as 33554432 or 32MiB, or off", artifacts.ErrInvalid, EnvPresignThreshold, v)
	}
	return n * mult, nil
}

// maxSinglePut is the largest object S3 takes in one PUT (5 GiB); a
// larger one goes through the API rather than be refused after the
// upload (presigned multipart uploads are not implemented).
const maxSinglePut = 5 << 30

// presignState is what the client learnt of the server's presigned
// transfers: asked once (GET /config), shared by the client's copies.
type presignState struct {
	mu        sync.Mutex
	known, ok bool
}

// presigns reports whether an object of size bytes moves through
// presigned URLs: above the threshold, when the server offers them.
func (c *Client) presigns(ctx context.Context, size int64) bool {
	if c.threshold < 0 || size <= c.threshold || size > maxSinglePut {
		return false
	}
	p := c.presign
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known {
		return p.ok
	}
	ok, err := c.preSignSupport(ctx)
	if err != nil {
		// Asked again with the next large object.
		c.log.Debug().Err(err).Msg("lakefs: could not learn whether the server presigns; using the API")
		return false
	}
	p.known, p.ok = true, ok
	c.log.Debug().Bool("pre_sign_support", ok).Msg("lakefs: storage configuration")
	return ok
}

// noPresign remembers that the server answered a presign endpoint as one
// it does not have.
func (c *Client) noPresign() {
	c.presign.mu.Lock()
	c.presign.known, c.presign.ok = true, false
	c.presign.mu.Unlock()
}

// preSignSupport asks the server's storage configuration (GET /config)
// whether its block store hands out presigned URLs. A server without the
// endpoint offers none.
func (c *Client) preSignSupport(ctx context.Context) (bool, error) {
	var cfg lakefsapi.Config
	err := c.call(ctx, http.MethodGet, pathOf("config"), nil, nil, &cfg)
	if unsupported(err) {
		return false, nil
	}
	if err != nil {
		return false, c.translate(err, kinds{}, "read the storage configuration")
	}
	if cfg.StorageConfig != nil && cfg.StorageConfig.PreSignSupport {
		return true, nil
	}
	for _, sc := range cfg.StorageConfigList {
		if sc.PreSignSupport {
			return true, nil
		}
	}
	return false, nil
}

// unsupported reports whether err is the server saying it has no such
// endpoint, or will not serve it: 404 or 501.
func unsupported(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusNotImplemented)
}

// upload is an object on its way in: what PutObject learnt of its body.
type upload struct {
	what, branch, path string
	body               io.ReadSeeker // at the object's first byte
	sum                string        // SHA-256 hex
	hash               bodyHash      // its CRC-32C too, to check the upload
	length             int64
	contentType        string
	opts               artifacts.PutOptions
}

// putPresigned stages an object as lakeFS's clients do for large files:
// getPhysicalAddress with presign=true, a PUT of the body to the URL it
// gives (the bytes go to the block store, not through the server), then
// linkPhysicalAddress, which stages the object on the branch. Until the
// link nothing is staged: an upload cut off leaves the branch as it was.
// done is false when the object is to go through the API instead: the
// server has no presign endpoint (404, 501) or gave no URL, or the
// transfer failed (logged at warn); the body is then rewound.
func (s *Store) putPresigned(ctx context.Context, u upload) (info artifacts.ObjectInfo, done bool, err error) {
	start, err := u.body.Seek(0, io.SeekCurrent)
	if err != nil {
		return info, false, nil
	}
	rewind := func() (artifacts.ObjectInfo, bool, error) {
		if _, err := u.body.Seek(start, io.SeekStart); err != nil {
			return artifacts.ObjectInfo{}, true, fmt.Errorf("lakefs: %s: rewind the body to send it through the API: %w", u.what, err)
		}
		return artifacts.ObjectInfo{}, false, nil
	}
	if u.opts.IfAbsent {
		// Refuse before sending the bytes anywhere; the link checks again.
		if _, err := s.stat(ctx, u.branch, u.path); err == nil {
			return info, true, fmt.Errorf("lakefs: %s: %w: %s:%s holds an object already", u.what, artifacts.ErrObjectExists, u.branch, u.path)
		}
	}
	staging := s.repoPath("branches", u.branch, "staging", "backing")
	var loc lakefsapi.StagingLocation
	err = s.c.call(ctx, http.MethodGet, staging, url.Values{"path": {u.path}, "presign": {"true"}}, nil, &loc)
	if s.endpointMissing(err) {
		return rewind()
	}
	if err != nil {
		return info, true, s.onWrite(ctx, u.branch, s.c.translate(err, kinds{notFound: artifacts.ErrBranchNotFound}, u.what))
	}
	if loc.PresignedURL == "" || loc.PhysicalAddress == "" {
		return rewind()
	}
	sent := newSentReader(u.body)
	md := md5.New()
	etag, err := s.c.transfer(ctx, http.MethodPut, loc.PresignedURL, io.TeeReader(sent, md), u.length)
	if err == nil {
		err = checkETag(etag, hex.EncodeToString(md.Sum(nil)), hostOf(loc.PresignedURL))
	}
	if err != nil {
		if ctx.Err() != nil {
			return info, true, fmt.Errorf("lakefs: %s: %w", u.what, ctx.Err())
		}
		s.c.log.Warn().Err(fmt.Errorf("lakefs: %s: %w", u.what, err)).Msg("lakefs: sending the object through the lakeFS API instead")
		return rewind()
	}
	if how, changed := sent.changed(u.hash); changed {
		// Uploaded, but not linked: nothing is staged.
		return info, true, fmt.Errorf("lakefs: %s: %w: the body changed while it was sent (%s): nothing was staged; put it again from a body that does not change",
			u.what, artifacts.ErrIntegrity, how)
	}

	meta := map[string]string{MetaSHA256: u.sum}
	for k, v := range u.opts.Metadata {
		meta[strings.ToLower(k)] = v
	}
	r, err := jsonRequest(http.MethodPut, staging, lakefsapi.StagingMetadata{
		Staging:      lakefsapi.StagingLocation{PhysicalAddress: loc.PhysicalAddress},
		Checksum:     etag,
		SizeBytes:    u.length,
		UserMetadata: meta,
		ContentType:  u.contentType,
	})
	if err != nil {
		return info, true, err
	}
	r.query = url.Values{"path": {u.path}}
	if u.opts.IfAbsent {
		r.header.Set("If-None-Match", "*")
	}
	resp, err := s.c.do(ctx, r)
	if s.endpointMissing(err) {
		return rewind()
	}
	if err != nil {
		err = s.c.translate(err, kinds{notFound: artifacts.ErrBranchNotFound, precondition: artifacts.ErrObjectExists}, u.what)
		return info, true, s.onWrite(ctx, u.branch, err)
	}
	defer drain(resp.Body)
	var st lakefsapi.ObjectStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return info, true, fmt.Errorf("lakefs: %s: decode answer: %w", u.what, err)
	}
	info = objectInfoFromWire(st)
	if info.Path == "" {
		info.Path = u.path
	}
	return info, true, nil
}

// endpointMissing reports whether a staging endpoint answered err as one
// the server does not have (404 or 501), and then remembers that the
// server offers no presigned transfers. A 404 that names a branch or a
// repository is the object's own error, not that.
func (s *Store) endpointMissing(err error) bool {
	if !unsupported(err) {
		return false
	}
	t := s.c.translate(err, kinds{}, "stage through a presigned URL")
	if errors.Is(t, artifacts.ErrBranchNotFound) || errors.Is(t, artifacts.ErrRepositoryNotFound) {
		return false
	}
	s.c.log.Debug().Err(t).Msg("lakefs: the server does not offer presigned transfers; using the API")
	s.c.noPresign()
	return true
}

// getPresigned opens an object through a presigned URL: a stat with
// presign=true gives a URL to the block store, read without the lakeFS
// server. ok is false when the object is to be read through the API
// instead: no URL was given, or the read failed (logged at warn).
func (s *Store) getPresigned(ctx context.Context, ref, arg, path string) (io.ReadCloser, artifacts.ObjectInfo, bool) {
	what := fmt.Sprintf("get %s:%s", ref, path)
	var st lakefsapi.ObjectStats
	q := url.Values{"path": {path}, "user_metadata": {"true"}, "presign": {"true"}}
	if err := s.c.call(ctx, http.MethodGet, s.repoPath("refs", arg, "objects", "stat"), q, nil, &st); err != nil {
		return nil, artifacts.ObjectInfo{}, false
	}
	if !strings.HasPrefix(st.PhysicalAddress, "http://") && !strings.HasPrefix(st.PhysicalAddress, "https://") {
		if unsupportedRead(st) {
			s.c.noPresign()
		}
		return nil, artifacts.ObjectInfo{}, false
	}
	body, err := s.c.open(ctx, st.PhysicalAddress, st)
	if err != nil {
		if ctx.Err() == nil {
			s.c.log.Warn().Err(fmt.Errorf("lakefs: %s: %w", what, err)).Msg("lakefs: reading the object through the lakeFS API instead")
		}
		return nil, artifacts.ObjectInfo{}, false
	}
	info := objectInfoFromWire(st)
	// The bytes came from a third party, the block store: check them
	// against the recorded SHA-256 or, from a server whose checksums are
	// SHA-256s (`rlpipe store serve`), against the checksum itself.
	want := recordedSHA256(st)
	if want == "" && isSHA256Hex(st.Checksum) {
		want = st.Checksum
	}
	if want != "" {
		return newVerifyingReader(body, want, ref+":"+path), info, true
	}
	return body, info, true
}

// unsupportedRead: a stat asked to presign gave a block-store address
// (s3://…) rather than a URL, so the server presigns no reads.
func unsupportedRead(st lakefsapi.ObjectStats) bool { return st.PhysicalAddressExpiry == 0 }

// open GETs a presigned URL and checks that the answer has the object's
// size.
func (c *Client) open(ctx context.Context, u string, st lakefsapi.ObjectStats) (io.ReadCloser, error) {
	resp, err := c.send1(ctx, http.MethodGet, u, nil, 0)
	if err != nil {
		return nil, err
	}
	if st.SizeBytes != nil && resp.ContentLength >= 0 && resp.ContentLength != *st.SizeBytes {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: read from %s: %d bytes, the object has %d", ErrPresignedTransfer, hostOf(u), resp.ContentLength, *st.SizeBytes)
	}
	return resp.Body, nil
}

// transfer sends body (length bytes) to a presigned URL and returns the
// block store's ETag of it.
func (c *Client) transfer(ctx context.Context, method, u string, body io.Reader, length int64) (string, error) {
	resp, err := c.send1(ctx, method, u, body, length)
	if err != nil {
		return "", err
	}
	drain(resp.Body)
	return strings.Trim(resp.Header.Get("ETag"), `"`), nil
}

// send1 sends one request to a presigned URL: no credentials (the URL
// carries its own authority), no retry (a failure goes through the API
// instead). Its errors name the URL's scheme and host only.
func (c *Client) send1(ctx context.Context, method, u string, body io.Reader, length int64) (*http.Response, error) {
	host := hostOf(u)
	verb := "read from"
	if method != http.MethodGet {
		verb = "upload to"
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%w: %s the block store: the presigned URL does not parse", ErrPresignedTransfer, verb)
	}
	if body != nil {
		req.ContentLength = length
		if length == 0 {
			req.Body = http.NoBody
		}
	}
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err == nil {
		c.log.Debug().Str("method", method).Str("host", host).Int("status", resp.StatusCode).
			Dur("elapsed", time.Since(start)).Msg("lakefs presigned request")
	}
	if err != nil {
		// A *url.Error quotes the whole URL, signature included: keep
		// only what went wrong.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%w: %s the block store at %s: %v", ErrPresignedTransfer, verb, host, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		why := blockStoreError(resp)
		return nil, fmt.Errorf("%w: %s the block store at %s: it answered %s", ErrPresignedTransfer, verb, host, why)
	}
	return resp, nil
}

// checkETag compares the ETag a block store gave an upload with the MD5
// of the bytes sent, when the ETag is an MD5 (S3's single PUT; a
// multipart or encrypted ETag is not, and is left unchecked): bytes
// damaged on the way must not be linked, since the link takes the block
// store's word for them.
func checkETag(etag, sentMD5, host string) error {
	if len(etag) != 32 {
		return nil
	}
	if _, err := hex.DecodeString(etag); err != nil || strings.EqualFold(etag, sentMD5) {
		return nil
	}
	return fmt.Errorf("%w: upload to the block store at %s: it holds other bytes than were sent (MD5 %s sent, its ETag %s); nothing was linked",
		ErrPresignedTransfer, host, sentMD5, etag)
}

// hostOf is a URL's scheme and host: what an error may name of a
// presigned URL.
func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return "(an unreadable URL)"
	}
	return p.Scheme + "://" + p.Host
}

// blockStoreError describes an error answer of a block store by its
// status and, from S3's XML error, its Code and Message only: the rest
// of such a body (StringToSign, SignatureProvided, AWSAccessKeyId) may
// hold what signed the URL.
func blockStoreError(resp *http.Response) string {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	why := fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	var e struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	if xml.Unmarshal(b, &e) == nil && e.Code != "" {
		why += " (" + e.Code
		if m := e.Message; m != "" {
			if len(m) > maxErrorText {
				m = strings.ToValidUTF8(m[:maxErrorText], "") + "…"
			}
			why += ": " + m
		}
		why += ")"
	}
	return why
}
