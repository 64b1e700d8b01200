package storeserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/internal/lakefsapi"
)

// metaHeaderPrefix introduces user metadata on upload, as on lakeFS: the
// rest of the header name, lower-cased, is the key.
const metaHeaderPrefix = "x-lakefs-meta-"

// copyBufferSize is the size of the reads that stream objects out.
const copyBufferSize = 32 << 10

// uploadObject answers POST …/branches/{branch}/objects?path=: the body
// (raw, or the part "content" of a multipart form) streams into
// Store.PutObject, which sees it as the client sends it; nothing is
// buffered whole. Its Content-Type is the object's, except for
// application/octet-stream (see isDefaultContentType). If-None-Match: *
// uploads only to a free path and is checked before the body is read.
func (s *Server) uploadObject(c *call) error {
	branch, path, err := c.branchPath()
	if err != nil {
		return err
	}
	ifAbsent, err := c.ifAbsent("put " + branch + ":" + path)
	if err != nil {
		return err
	}
	body := io.Reader(c.r.Body)
	ct := c.r.Header.Get("Content-Type")
	if ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil {
			return errorf(http.StatusBadRequest, "put %s:%s: Content-Type %q: %v", branch, path, ct, err)
		}
		if mt == "multipart/form-data" {
			part, err := contentPart(c.r)
			if err != nil {
				return errorf(http.StatusBadRequest, "put %s:%s: %v", branch, path, err)
			}
			defer part.Close()
			body, ct = part, part.Header.Get("Content-Type")
		}
	}
	if isDefaultContentType(ct) {
		ct = ""
	}
	if ifAbsent {
		// Refuse before reading the body: a client that sent
		// Expect: 100-continue then does not send it at all.
		if _, err := s.st.GetBranch(c.ctx(), branch); err != nil {
			return err
		}
		if _, err := s.st.StatObject(c.ctx(), branch, path); err == nil {
			return errorf(http.StatusPreconditionFailed, "object exists: %s:%s holds an object already (upload without If-None-Match to overwrite it)", branch, path)
		} else if !errors.Is(err, artifacts.ErrObjectNotFound) {
			return err
		}
	}
	st, err := s.put(c.ctx(), branch, path, body, &artifacts.PutOptions{
		ContentType: ct, Metadata: userMetadata(c.r.Header), IfAbsent: ifAbsent,
	})
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusCreated, st)
	return nil
}

// put stores body at branch:path with o (its metadata as the client sent
// it) and describes the object as the server reports it: the one way in
// for an upload and for a link of a presigned upload.
func (s *Server) put(ctx context.Context, branch, path string, body io.Reader, o *artifacts.PutOptions) (lakefsapi.ObjectStats, error) {
	md5r := s.newMD5Reader(body)
	if md5r != nil {
		body = md5r
	}
	opts := *o
	opts.Metadata = s.storedMetadata(o.Metadata)
	info, err := s.st.PutObject(ctx, branch, path, body, &opts)
	if err != nil {
		return lakefsapi.ObjectStats{}, err
	}
	if md5r != nil {
		s.rememberMD5(info.Checksum, md5r.sum())
	}
	return s.describe(ctx, branch, path, info, true)
}

// ifAbsent reads an upload's If-None-Match: * (write only to a free
// path), the one value lakeFS takes.
func (c *call) ifAbsent(what string) (bool, error) {
	switch inm := c.r.Header.Get("If-None-Match"); inm {
	case "":
		return false, nil
	case "*":
		return true, nil
	default:
		return false, errorf(http.StatusBadRequest, "%s: If-None-Match %q: only * (upload only if the path holds no object) is supported", what, inm)
	}
}

// isDefaultContentType reports whether ct is application/octet-stream,
// which the lakefs:// backend sends for an object put without a content
// type. It is stored as none, as a direct put without one is: identical
// bytes written either way are then the same object to diff and merge.
func isDefaultContentType(ct string) bool {
	mt, params, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/octet-stream" && len(params) == 0
}

// contentPart returns the part named "content" of a multipart upload.
func contentPart(r *http.Request) (*multipart.Part, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, fmt.Errorf("multipart body: %v", err)
	}
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil, errors.New(`multipart body has no part named "content"`)
		}
		if err != nil {
			return nil, fmt.Errorf("multipart body: %v", err)
		}
		if p.FormName() == "content" {
			return p, nil
		}
		p.Close()
	}
}

// userMetadata collects X-Lakefs-Meta-* headers; keys are lower-case.
func userMetadata(h http.Header) map[string]string {
	var md map[string]string
	for k, vs := range h {
		lk := strings.ToLower(k)
		key, ok := strings.CutPrefix(lk, metaHeaderPrefix)
		if !ok || key == "" || len(vs) == 0 {
			continue
		}
		if md == nil {
			md = map[string]string{}
		}
		md[key] = vs[0]
	}
	return md
}

// getObject answers GET and HEAD …/refs/{ref}/objects?path=. The body
// streams from the store; a Range header of one range is served with
// Store's RangeReader when it has one (without, the whole object is sent,
// as HTTP lets a server ignore Range). The ETag is the checksum stats
// report (wireChecksum).
func (s *Server) getObject(c *call) error {
	ref := c.p["ref"]
	path, err := c.required("path")
	if err != nil {
		return err
	}
	if err := s.missStaged(c, ref, path); err != nil {
		return err
	}
	head := c.r.Method == http.MethodHead
	if spec := c.r.Header.Get("Range"); spec != "" {
		if rr, ok := s.st.(artifacts.RangeReader); ok {
			info, err := s.st.StatObject(c.ctx(), ref, path)
			if err != nil {
				return err
			}
			if info.Checksum, err = s.wireChecksum(c.ctx(), ref, path, info.Checksum); err != nil {
				return err
			}
			start, length, err := parseRange(spec, info.Size)
			switch {
			case errors.Is(err, errUnsatisfiable):
				c.w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", info.Size))
				return errorf(http.StatusRequestedRangeNotSatisfiable, "read %s:%s: range %q is past the end of the object (%d bytes)", ref, path, spec, info.Size)
			case err == nil:
				return sendRange(c, rr, ref, path, info, start, length, head)
			}
			// A range this server does not serve (several ranges, or
			// malformed): send the whole object.
		}
	}
	if head {
		info, err := s.st.StatObject(c.ctx(), ref, path)
		if err != nil {
			return err
		}
		if info.Checksum, err = s.wireChecksum(c.ctx(), ref, path, info.Checksum); err != nil {
			return err
		}
		objectHeaders(c.w.Header(), info, info.Size)
		c.w.WriteHeader(http.StatusOK)
		return nil
	}
	rc, info, err := s.st.GetObject(c.ctx(), ref, path)
	if err != nil {
		return err
	}
	defer rc.Close()
	if info.Checksum, err = s.wireChecksum(c.ctx(), ref, path, info.Checksum); err != nil {
		return err
	}
	objectHeaders(c.w.Header(), info, info.Size)
	return send(c, rc, http.StatusOK, info.Size, fmt.Sprintf("read %s:%s", ref, path))
}

// sendRange answers a single range.
func sendRange(c *call, rr artifacts.RangeReader, ref, path string, info artifacts.ObjectInfo, start, length int64, head bool) error {
	h := c.w.Header()
	objectHeaders(h, info, length)
	h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, start+length-1, info.Size))
	if head {
		c.w.WriteHeader(http.StatusPartialContent)
		return nil
	}
	rc, err := rr.GetObjectRange(c.ctx(), ref, path, start, length)
	if err != nil {
		clearObjectHeaders(h)
		return err
	}
	defer rc.Close()
	return send(c, rc, http.StatusPartialContent, length, fmt.Sprintf("read %s:%s at %d+%d", ref, path, start, length))
}

// send streams exactly size bytes of r as the answer with status; the
// caller set the headers with objectHeaders. Until the first byte goes out an error is
// answered as such; after, the connection is cut (the client sees an
// error), so that a body that fails midway, or at its end as a digest
// mismatch does, never reaches the client as a whole object.
func send(c *call, r io.Reader, status int, size int64, what string) error {
	lw := &lazyWriter{w: c.w, status: status}
	err := copyExactly(lw, r, size)
	if err == nil {
		lw.start()
		return nil
	}
	if !lw.started {
		clearObjectHeaders(c.w.Header())
		return fmt.Errorf("%s: %w", what, err)
	}
	panic(http.ErrAbortHandler)
}

// errSize: the store gave more or fewer bytes than it recorded.
var errSize = errors.New("object length differs from the recorded size")

// copyExactly copies r to w, which must be exactly size bytes long. It
// holds back the last byte until r has ended cleanly at size bytes: a
// reader that fails at its end (as a digest check does) or that is shorter
// or longer than recorded never writes a whole object.
func copyExactly(w io.Writer, r io.Reader, size int64) error {
	buf := make([]byte, 1+copyBufferSize)
	var total int64
	held := false // buf[0] is a byte read but not written
	for {
		n, err := r.Read(buf[1:])
		if n > 0 {
			total += int64(n)
			if total > size {
				return fmt.Errorf("%w: %w (more than %d bytes)", artifacts.ErrIntegrity, errSize, size)
			}
			from := 1
			if held {
				from = 0
			}
			if chunk := buf[from:n]; len(chunk) > 0 {
				if _, werr := w.Write(chunk); werr != nil {
					return werr
				}
			}
			buf[0], held = buf[n], true
		}
		if errors.Is(err, io.EOF) {
			if total != size {
				return fmt.Errorf("%w: %w (%d of %d bytes)", artifacts.ErrIntegrity, errSize, total, size)
			}
			if held {
				_, err := w.Write(buf[:1])
				return err
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// lazyWriter sends the status with the first byte of the body.
type lazyWriter struct {
	w       http.ResponseWriter
	status  int
	started bool
}

func (l *lazyWriter) start() {
	if !l.started {
		l.started = true
		l.w.WriteHeader(l.status)
	}
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	l.start()
	return l.w.Write(p)
}

// objectHeaders describes an object in the headers of a GET or HEAD.
func objectHeaders(h http.Header, info artifacts.ObjectInfo, length int64) {
	ct := info.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.FormatInt(length, 10))
	h.Set("ETag", `"`+info.Checksum+`"`)
	if !info.Mtime.IsZero() {
		h.Set("Last-Modified", info.Mtime.UTC().Format(http.TimeFormat))
	}
	h.Set("Accept-Ranges", "bytes")
	// An object is data, never a page: a browser pointed at a stored
	// HTML file must not run it with this server's origin.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox")
}

func clearObjectHeaders(h http.Header) {
	for _, k := range []string{"Content-Type", "Content-Length", "ETag", "Last-Modified", "Accept-Ranges", "Content-Range", "Content-Security-Policy"} {
		h.Del(k)
	}
}

// errUnsatisfiable: a range that starts past the end of the object.
var errUnsatisfiable = errors.New("range not satisfiable")

// parseRange reads a Range header of one byte range (bytes=A-B, bytes=A-
// or bytes=-N) against an object of size bytes, clamping its end.
func parseRange(spec string, size int64) (start, length int64, err error) {
	v, ok := strings.CutPrefix(strings.TrimSpace(spec), "bytes=")
	if !ok || strings.Contains(v, ",") {
		return 0, 0, fmt.Errorf("range %q: want one range bytes=A-B", spec)
	}
	a, b, ok := strings.Cut(strings.TrimSpace(v), "-")
	if !ok {
		return 0, 0, fmt.Errorf("range %q: want one range bytes=A-B", spec)
	}
	num := func(s string) (int64, bool) {
		if s == "" || strings.Trim(s, "0123456789") != "" {
			return 0, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil
	}
	if a == "" { // the last N bytes
		n, ok := num(b)
		if !ok {
			return 0, 0, fmt.Errorf("range %q: bad suffix length", spec)
		}
		if n == 0 || size == 0 {
			return 0, 0, errUnsatisfiable
		}
		n = min(n, size)
		return size - n, n, nil
	}
	first, ok := num(a)
	if !ok {
		return 0, 0, fmt.Errorf("range %q: bad first byte", spec)
	}
	last := size - 1
	if b != "" {
		if last, ok = num(b); !ok || last < first {
			return 0, 0, fmt.Errorf("range %q: bad last byte", spec)
		}
		last = min(last, size-1)
	}
	if first >= size {
		return 0, 0, errUnsatisfiable
	}
	return first, last - first + 1, nil
}

func (s *Server) statObject(c *call) error {
	path, err := c.required("path")
	if err != nil {
		return err
	}
	withMeta, err := c.boolean("user_metadata", true)
	if err != nil {
		return err
	}
	presign, err := c.boolean("presign", false)
	if err != nil {
		return err
	}
	if err := s.missStaged(c, c.p["ref"], path); err != nil {
		return err
	}
	info, err := s.st.StatObject(c.ctx(), c.p["ref"], path)
	if err != nil {
		return err
	}
	st, err := s.describe(c.ctx(), c.p["ref"], path, info, withMeta)
	if err != nil {
		return err
	}
	if presign {
		if err := s.presignRead(c.p["ref"], path, info, &st); err != nil {
			return err
		}
	}
	writeJSON(c.w, http.StatusOK, st)
	return nil
}

// listObjects answers GET …/refs/{ref}/objects/ls: a page of objects and
// (with a delimiter) common prefixes in path order, after a path.
func (s *Server) listObjects(c *call) error {
	amount, err := c.amount()
	if err != nil {
		return err
	}
	withMeta, err := c.boolean("user_metadata", true)
	if err != nil {
		return err
	}
	opts := &artifacts.ListOptions{Prefix: c.q.Get("prefix"), Delimiter: c.q.Get("delimiter"), After: c.q.Get("after"), Limit: amount + 1}
	page := make([]artifacts.Entry, 0, min(amount, 64))
	more := false
	for e, err := range s.st.ListObjects(c.ctx(), c.p["ref"], opts) {
		if err != nil {
			return err
		}
		if len(page) == amount {
			more = true
			break
		}
		page = append(page, e)
	}
	// Checksums once the listing is over: wireChecksum may read objects,
	// which is not to be done from inside the store's iteration.
	out := make([]lakefsapi.ObjectStats, 0, len(page))
	for _, e := range page {
		if e.CommonPrefix {
			out = append(out, lakefsapi.ObjectStats{Path: e.Path, PathType: lakefsapi.PathTypeCommonPrefix})
			continue
		}
		st, err := s.describe(c.ctx(), c.p["ref"], e.Path, e.ObjectInfo, withMeta)
		if err != nil {
			return err
		}
		out = append(out, st)
	}
	last := ""
	if len(out) > 0 {
		last = out[len(out)-1].Path
	}
	return writeResults(c, out, more, last)
}

func (s *Server) deleteObject(c *call) error {
	branch, path, err := c.branchPath()
	if err != nil {
		return err
	}
	if err := s.st.DeleteObject(c.ctx(), branch, path); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// copyObject answers POST …/branches/{branch}/objects/copy?dest_path=
// with the store's Copier: the object is linked, its bytes not copied.
//
// A shallow copy (shallow: true) is answered as lakeFS v1.84.0 answers
// it, once the destination branch is known to exist: 501 with lakeFS's
// error body, whose message leads with lakeFS's words ("Not Implemented")
// and goes on to say what to send instead. The server links objects
// whatever the request asks, so it could serve one; refusing it keeps the
// server a faithful stand-in for lakeFS, on which a client that asks for
// shallow copies fails.
func (s *Server) copyObject(c *call) error {
	branch, err := c.branch("branch")
	if err != nil {
		return err
	}
	dest, err := c.required("dest_path")
	if err != nil {
		return err
	}
	var body lakefsapi.ObjectCopyCreation
	if err := decodeJSON(c.r, s.opts.MaxJSONBytes, &body, false); err != nil {
		return err
	}
	if body.SrcPath == "" {
		return errorf(http.StatusBadRequest, "copy to %s:%s: the body names no src_path", branch, dest)
	}
	if body.Shallow {
		if _, err := s.st.GetBranch(c.ctx(), branch); err != nil {
			return err
		}
		return errorf(http.StatusNotImplemented, "%s: copy to %s:%s: shallow copies are refused, as lakeFS v1.84.0 refuses them; send shallow false for a full copy", http.StatusText(http.StatusNotImplemented), branch, dest)
	}
	cp, ok := s.st.(artifacts.Copier)
	if !ok {
		return errorf(http.StatusNotImplemented, "not supported: copy to %s:%s: the store behind this server cannot link objects (no artifacts.Copier); read and upload the object instead", branch, dest)
	}
	src := body.SrcRef
	if src == "" {
		src = branch
	}
	info, err := cp.CopyObject(c.ctx(), src, body.SrcPath, branch, dest)
	if err != nil {
		return err
	}
	st, err := s.describe(c.ctx(), branch, dest, info, true)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusCreated, st)
	return nil
}

// missStaged answers 404 for a read of a staged object that a fault
// says races a commit: Faults.CommitWindow (the object was staged on ref
// when a commit of ref, still in flight, began) or Faults.MissStagedOnce
// (the first read of each staged version of ref:path).
func (s *Server) missStaged(c *call, ref, path string) error {
	f := s.opts.Faults
	if f.CommitWindow > 0 {
		s.missedMu.Lock()
		racing := s.committing[ref][path]
		s.missedMu.Unlock()
		if racing {
			s.misses.Add(1)
			return errorf(http.StatusNotFound, "object not found (a fault: the read of a staged object races a commit of %s)", ref)
		}
	}
	if !f.MissStagedOnce {
		return nil
	}
	br, err := s.st.GetBranch(c.ctx(), ref)
	if err != nil {
		return nil // not a branch: nothing is staged
	}
	info, err := s.st.StatObject(c.ctx(), ref, path)
	if err != nil {
		return nil // the read answers for itself
	}
	if old, err := s.st.StatObject(c.ctx(), br.CommitID, path); err == nil && old.Checksum == info.Checksum {
		return nil // committed
	}
	key := ref + "\x00" + path + "\x00" + info.Checksum
	s.missedMu.Lock()
	defer s.missedMu.Unlock()
	if s.missed == nil {
		s.missed = map[string]bool{}
	}
	if s.missed[key] {
		return nil
	}
	s.missed[key] = true
	s.misses.Add(1)
	return errorf(http.StatusNotFound, "object not found (a fault: the read of a staged object races a commit of %s)", ref)
}

// openCommitWindow is Faults.CommitWindow for a commit of branch: it
// records what the branch has staged, waits out the window (the commit
// proper follows it), and returns the function that closes the window
// once the commit has landed. Commits take turns while the fault is on.
func (s *Server) openCommitWindow(c *call, branch string) (done func(), err error) {
	s.commitMu.Lock()
	staged := map[string]bool{}
	for ch, err := range s.st.DiffUncommitted(c.ctx(), branch) {
		if err != nil {
			s.commitMu.Unlock()
			return nil, err
		}
		if ch.Type != artifacts.ChangeRemoved {
			staged[ch.Path] = true
		}
	}
	s.missedMu.Lock()
	if s.committing == nil {
		s.committing = map[string]map[string]bool{}
	}
	s.committing[branch] = staged
	s.missedMu.Unlock()
	done = func() {
		s.missedMu.Lock()
		delete(s.committing, branch)
		s.missedMu.Unlock()
		s.commitMu.Unlock()
	}
	select {
	case <-c.ctx().Done():
		done()
		return nil, c.ctx().Err()
	case <-time.After(s.opts.Faults.CommitWindow):
	}
	return done, nil
}
