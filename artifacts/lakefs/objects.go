package lakefs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/internal/lakefsapi"
)

// metaHeaderPrefix introduces user metadata on upload; lakeFS stores the
// rest of the (lower-cased) header name as the key.
const metaHeaderPrefix = "x-lakefs-meta-"

// PutObject stages an object on a branch. The body streams from r straight
// into the request: nothing is buffered beyond the transport's small
// write buffer, whatever the size. r is read to its end but not closed.
//
// The upload is a raw body (POST …/branches/{branch}/objects?path=) whose
// Content-Type becomes the object's content type. When r can be read
// twice (an io.Seeker such as a file or a bytes.Reader, or a
// bytes.Buffer) it is read once first to learn its SHA-256, sent as user
// metadata under MetaSHA256 (the header goes before the body), and its
// length, sent as Content-Length; the upload is checked as it is sent
// against a CRC-32C taken in that first pass (not a second SHA-256), and
// bytes that changed in between fail the put. Other readers are
// sent once, chunked unless Len() gives their length, and their object
// keeps lakeFS's checksum.
func (s *Store) PutObject(ctx context.Context, branch, path string, r io.Reader, opts *artifacts.PutOptions) (artifacts.ObjectInfo, error) {
	what := fmt.Sprintf("put %s:%s", branch, path)
	if err := checkBranch(branch); err != nil {
		return artifacts.ObjectInfo{}, fmt.Errorf("lakefs: %s: %w", what, err)
	}
	if err := artifacts.ValidatePath(path); err != nil {
		return artifacts.ObjectInfo{}, fmt.Errorf("lakefs: %s: %w", what, err)
	}
	o := artifacts.ValueOf(opts)
	h := http.Header{}
	ct := o.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	// lakeFS parses the Content-Type with mime.ParseMediaType before it
	// reads the body: one that does not parse fails the upload with a
	// 500, and multipart/form-data makes it read the body as a form.
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return artifacts.ObjectInfo{}, fmt.Errorf("lakefs: %s: %w: content type %q: %v", what, artifacts.ErrInvalid, ct, err)
	}
	if mt == "multipart/form-data" {
		return artifacts.ObjectInfo{}, fmt.Errorf("lakefs: %s: %w: content type multipart/form-data cannot be stored", what, artifacts.ErrInvalid)
	}
	h.Set("Content-Type", ct)
	for k, v := range o.Metadata {
		if err := checkMetadata(k, v); err != nil {
			return artifacts.ObjectInfo{}, fmt.Errorf("lakefs: %s: %w", what, err)
		}
		h.Set(metaHeaderPrefix+strings.ToLower(k), v)
	}
	bh, hashed, err := hashBody(r)
	sum, length := bh.sum, bh.length
	if err != nil {
		return artifacts.ObjectInfo{}, fmt.Errorf("lakefs: %s: %w", what, err)
	}
	// The caller owns r: send never closes it. A body that seeks stays
	// one that seeks, so that a send that never reached the server is
	// sent again (Client.do); a buffer is sent from a reader over its
	// bytes, and drained as if read.
	body := r
	if buf, ok := r.(*bytes.Buffer); ok {
		body = bytes.NewReader(buf.Bytes())
		defer buf.Next(buf.Len())
	}
	if rs, ok := body.(io.ReadSeeker); ok && hashed && s.c.presigns(ctx, length) {
		info, done, err := s.putPresigned(ctx, upload{what: what, branch: branch, path: path, body: rs, hash: bh, sum: sum, length: length, contentType: ct, opts: o})
		if done {
			return info, err
		}
	}
	var sent *sentReader
	if hashed {
		h.Set(metaHeaderPrefix+MetaSHA256, sum)
		sent = newSentReader(body)
		body = sent.body()
	} else {
		length = bodyLength(r)
	}
	if o.IfAbsent {
		h.Set("If-None-Match", "*")
		if length != 0 {
			// The server checks the precondition before reading the
			// body: do not send a large body it will refuse.
			h.Set("Expect", "100-continue")
		}
	}
	resp, err := s.c.do(ctx, request{
		method: http.MethodPost,
		path:   s.repoPath("branches", branch, "objects"),
		query:  url.Values{"path": {path}},
		header: h,
		body:   body,
		length: length,
	})
	if err != nil {
		err = s.c.translate(err, kinds{notFound: artifacts.ErrBranchNotFound, precondition: artifacts.ErrObjectExists}, what)
		return artifacts.ObjectInfo{}, s.onWrite(ctx, branch, err)
	}
	defer drain(resp.Body)
	if sent != nil {
		if how, changed := sent.changed(bh); changed {
			// Stored, but under a SHA-256 of other bytes: reads of it
			// fail its check until it is written again.
			return artifacts.ObjectInfo{}, fmt.Errorf("lakefs: %s: %w: the body changed while it was sent (%s), "+
				"so %s:%s holds bytes that do not match the SHA-256 recorded with them: put it again from a body that does not change",
				what, artifacts.ErrIntegrity, how, branch, path)
		}
	}
	var st lakefsapi.ObjectStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return artifacts.ObjectInfo{}, fmt.Errorf("lakefs: %s: decode answer: %w", what, err)
	}
	info := objectInfoFromWire(st)
	if info.Path == "" {
		info.Path = path
	}
	return info, nil
}

// bodyLength returns the number of bytes left in r when that is known
// without reading, else -1.
func bodyLength(r io.Reader) int64 {
	switch v := r.(type) {
	case interface{ Len() int }:
		return int64(v.Len())
	case io.Seeker:
		cur, err := v.Seek(0, io.SeekCurrent)
		if err != nil {
			return -1
		}
		end, err := v.Seek(0, io.SeekEnd)
		if err != nil {
			return -1
		}
		if _, err := v.Seek(cur, io.SeekStart); err != nil {
			return -1
		}
		if end < cur {
			return 0
		}
		return end - cur
	}
	return -1
}

// checkMetadata accepts keys that survive as HTTP header names and values
// that survive as header values.
func checkMetadata(k, v string) error {
	if k == "" {
		return fmt.Errorf("%w: empty metadata key", artifacts.ErrInvalid)
	}
	if strings.EqualFold(k, MetaSHA256) {
		return fmt.Errorf("%w: metadata key %q is reserved: the store records the object's SHA-256 under it; name your key otherwise", artifacts.ErrInvalid, k)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.!#$%&'*+^`|~", c) >= 0
		if !ok {
			return fmt.Errorf("%w: metadata key %q: use lower-case ASCII letters, digits and '-'", artifacts.ErrInvalid, k)
		}
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return fmt.Errorf("%w: metadata %q: value has a control character", artifacts.ErrInvalid, k)
		}
	}
	// HTTP drops white space around a header value, so the server would
	// store a different value than the one given.
	if strings.TrimLeft(v, " \t") != v || strings.TrimRight(v, " \t") != v {
		return fmt.Errorf("%w: metadata %q: value starts or ends with white space, which does not survive as an HTTP header", artifacts.ErrInvalid, k)
	}
	return nil
}

// GetObject opens an object for reading. The body streams from the
// server. ObjectInfo comes from a stat made just before. An object that
// carries a recorded SHA-256 (MetaSHA256) is checked against it as it is
// read: the last Read returns artifacts.ErrIntegrity instead of io.EOF
// when the bytes differ. Others are read unchecked; lakeFS checks its
// stored data itself.
func (s *Store) GetObject(ctx context.Context, ref, path string) (io.ReadCloser, artifacts.ObjectInfo, error) {
	st, err := s.stat(ctx, ref, path)
	if err != nil {
		return nil, artifacts.ObjectInfo{}, err
	}
	arg, _ := refArg(ref) // validated by stat
	if st.SizeBytes != nil && s.c.presigns(ctx, *st.SizeBytes) {
		if rc, info, ok := s.getPresigned(ctx, ref, arg, path); ok {
			return rc, info, nil
		}
	}
	what := fmt.Sprintf("get %s:%s", ref, path)
	resp, err := s.c.do(ctx, request{
		method: http.MethodGet,
		path:   s.repoPath("refs", arg, "objects"),
		query:  url.Values{"path": {path}},
		header: http.Header{"Accept": {"*/*"}},
	})
	if err != nil {
		return nil, artifacts.ObjectInfo{}, s.c.translate(err, kinds{notFound: artifacts.ErrObjectNotFound}, what)
	}
	// The ETag is lakeFS's checksum of the bytes sent, so it is compared
	// with lakeFS's checksum from the stat, not with a recorded SHA-256.
	etag := strings.Trim(resp.Header.Get("ETag"), `"`)
	if etag != "" && etag != st.Checksum {
		// Overwritten between the stat and the read: describe what is read.
		if again, err := s.stat(ctx, ref, path); err == nil && again.Checksum == etag {
			st = again
		}
	}
	info := objectInfoFromWire(st)
	if want := recordedSHA256(st); want != "" && etag == st.Checksum {
		// Only when the stat is known to describe these bytes.
		return newVerifyingReader(resp.Body, want, ref+":"+path), info, nil
	}
	return resp.Body, info, nil
}

// GetObjectRange returns length bytes from offset (length < 0: to the
// end) with a Range request.
func (s *Store) GetObjectRange(ctx context.Context, ref, path string, offset, length int64) (io.ReadCloser, error) {
	what := fmt.Sprintf("read %s:%s at %d+%d", ref, path, offset, length)
	arg, err := refArg(ref)
	if err != nil {
		return nil, fmt.Errorf("lakefs: %s: %w", what, err)
	}
	if err := artifacts.ValidatePath(path); err != nil {
		return nil, fmt.Errorf("lakefs: %s: %w", what, err)
	}
	if offset < 0 {
		return nil, fmt.Errorf("lakefs: %s: %w: negative offset", what, artifacts.ErrInvalid)
	}
	if length == 0 {
		if _, err := s.StatObject(ctx, ref, path); err != nil {
			return nil, err
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	rng := "bytes=" + strconv.FormatInt(offset, 10) + "-"
	if length > 0 {
		rng += strconv.FormatInt(offset+length-1, 10)
	}
	resp, err := s.c.do(ctx, request{
		method: http.MethodGet,
		path:   s.repoPath("refs", arg, "objects"),
		query:  url.Values{"path": {path}},
		header: http.Header{"Range": {rng}, "Accept": {"*/*"}},
	})
	if err != nil {
		if ae, ok := err.(*apiError); ok && ae.Status == http.StatusRequestedRangeNotSatisfiable {
			// Reading at or past the end gives no bytes, as a file does.
			if info, serr := s.StatObject(ctx, ref, path); serr == nil && offset >= info.Size {
				return io.NopCloser(strings.NewReader("")), nil
			}
		}
		return nil, s.c.translate(err, kinds{notFound: artifacts.ErrObjectNotFound}, what)
	}
	if resp.StatusCode == http.StatusPartialContent {
		return resp.Body, nil
	}
	// The whole object came back (the range was ignored): cut it here.
	if _, err := io.CopyN(io.Discard, resp.Body, offset); err != nil && err != io.EOF {
		resp.Body.Close()
		return nil, fmt.Errorf("lakefs: %s: %w", what, err)
	}
	if length < 0 {
		return resp.Body, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(resp.Body, length), resp.Body}, nil
}

// StatObject describes an object without reading it.
func (s *Store) StatObject(ctx context.Context, ref, path string) (artifacts.ObjectInfo, error) {
	st, err := s.stat(ctx, ref, path)
	if err != nil {
		return artifacts.ObjectInfo{}, err
	}
	return objectInfoFromWire(st), nil
}

// stat returns the server's description of an object, with lakeFS's own
// checksum and the user metadata as stored (MetaSHA256 included).
func (s *Store) stat(ctx context.Context, ref, path string) (lakefsapi.ObjectStats, error) {
	what := fmt.Sprintf("stat %s:%s", ref, path)
	arg, err := refArg(ref)
	if err != nil {
		return lakefsapi.ObjectStats{}, fmt.Errorf("lakefs: %s: %w", what, err)
	}
	if err := artifacts.ValidatePath(path); err != nil {
		return lakefsapi.ObjectStats{}, fmt.Errorf("lakefs: %s: %w", what, err)
	}
	var st lakefsapi.ObjectStats
	q := url.Values{"path": {path}, "user_metadata": {"true"}}
	if err := s.c.call(ctx, http.MethodGet, s.repoPath("refs", arg, "objects", "stat"), q, nil, &st); err != nil {
		return lakefsapi.ObjectStats{}, s.c.translate(err, kinds{notFound: artifacts.ErrObjectNotFound}, what)
	}
	return st, nil
}

// ListObjects lists objects under opts.Prefix in path order, folding
// paths past opts.Delimiter into common prefixes.
func (s *Store) ListObjects(ctx context.Context, ref string, opts *artifacts.ListOptions) iter.Seq2[artifacts.Entry, error] {
	return func(yield func(artifacts.Entry, error) bool) {
		what := fmt.Sprintf("list %s", ref)
		arg, err := refArg(ref)
		if err != nil {
			yield(artifacts.Entry{}, fmt.Errorf("lakefs: %s: %w", what, err))
			return
		}
		o := artifacts.ValueOf(opts)
		if o.Prefix != "" {
			what = fmt.Sprintf("list %s:%s", ref, o.Prefix)
		}
		q := url.Values{"user_metadata": {"true"}}
		if o.Prefix != "" {
			q.Set("prefix", o.Prefix)
		}
		if o.Delimiter != "" {
			q.Set("delimiter", o.Delimiter)
		}
		if o.After != "" {
			q.Set("after", o.After)
		}
		amount := maxPageSize
		if o.Limit > 0 && o.Limit < maxPageSize {
			amount = o.Limit
		}
		yieldPages(ctx, s, s.repoPath("refs", arg, "objects", "ls"), q, amount, o.Limit, what, entryFromWire, yield)
	}
}

// yieldPages yields what the pages of a ref's listing at path hold, as
// conv makes them, until limit (0: no limit) or the caller stops; an
// error is yielded alone, a 404 as ErrRefNotFound.
func yieldPages[W, T any](ctx context.Context, s *Store, path string, q url.Values, amount, limit int, what string, conv func(W) T, yield func(T, error) bool) {
	n := 0
	for w, err := range paginate[W](ctx, s.c, path, q, amount) {
		if err != nil {
			var zero T
			yield(zero, s.c.translate(err, kinds{notFound: artifacts.ErrRefNotFound}, what))
			return
		}
		if !yield(conv(w), nil) {
			return
		}
		if n++; limit > 0 && n >= limit {
			return
		}
	}
}

// DeleteObject stages the removal of an object. Like lakeFS, it does not
// fail when the path holds nothing.
func (s *Store) DeleteObject(ctx context.Context, branch, path string) error {
	what := fmt.Sprintf("delete %s:%s", branch, path)
	if err := checkBranch(branch); err != nil {
		return fmt.Errorf("lakefs: %s: %w", what, err)
	}
	if err := artifacts.ValidatePath(path); err != nil {
		return fmt.Errorf("lakefs: %s: %w", what, err)
	}
	err := s.c.call(ctx, http.MethodDelete, s.repoPath("branches", branch, "objects"), url.Values{"path": {path}}, nil, nil)
	return s.onWrite(ctx, branch, s.c.translate(err, kinds{notFound: artifacts.ErrObjectNotFound}, what))
}

// CopyObject stages dstBranch:dstPath as a copy of srcRef:srcPath. lakeFS
// copies within the repository on the server, and always a full copy: the
// bytes are copied to a new physical address, within one branch too.
//
// A shallow copy (same physical address, no bytes moved) is never asked
// for. lakeFS v1.84.0 answers every shallow copy 501 Not Implemented,
// whatever its OpenAPI document says; where older servers made one, an
// object sharing its address with another may be lost to garbage
// collection or retention policies (lakeFS's own warning). Trying shallow
// first and falling back on 501 would cost every copy a refused round
// trip on current servers, to gain a saving that is unsafe where it exists.
func (s *Store) CopyObject(ctx context.Context, srcRef, srcPath, dstBranch, dstPath string) (artifacts.ObjectInfo, error) {
	what := fmt.Sprintf("copy %s:%s to %s:%s", srcRef, srcPath, dstBranch, dstPath)
	arg, err := refArg(srcRef)
	if err != nil {
		return artifacts.ObjectInfo{}, fmt.Errorf("lakefs: %s: %w", what, err)
	}
	if err := checkBranch(dstBranch); err != nil {
		return artifacts.ObjectInfo{}, fmt.Errorf("lakefs: %s: %w", what, err)
	}
	for _, p := range []string{srcPath, dstPath} {
		if err := artifacts.ValidatePath(p); err != nil {
			return artifacts.ObjectInfo{}, fmt.Errorf("lakefs: %s: %w", what, err)
		}
	}
	body := lakefsapi.ObjectCopyCreation{SrcPath: srcPath, SrcRef: arg}
	var st lakefsapi.ObjectStats
	err = s.c.call(ctx, http.MethodPost, s.repoPath("branches", dstBranch, "objects", "copy"), url.Values{"dest_path": {dstPath}}, body, &st)
	if err != nil {
		return artifacts.ObjectInfo{}, s.onWrite(ctx, dstBranch, s.c.translate(err, kinds{notFound: artifacts.ErrObjectNotFound}, what))
	}
	return objectInfoFromWire(st), nil
}
