package lakefs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"strings"
	"sync"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/internal/lakefsapi"
)

// MetaSHA256 is the user-metadata key under which the store records the
// SHA-256 hex of the bytes of every object it uploads whole from a body it
// can read twice (a file, a bytes or strings reader, a bytes.Buffer).
//
// lakeFS's own checksum is its block store's ETag (the MD5 hex of the
// content on the local block store, something else on S3 for multipart
// uploads), while the embedded store's is the SHA-256 hex. Cache keys and
// provenance are built from ObjectInfo.Checksum, so the store reports the
// recorded SHA-256 instead of lakeFS's checksum whenever an object carries
// one: the same bytes then have the same checksum on both backends, and a
// run resumed through the other backend of the same data hits its cache.
//
// The key is reserved: PutObject refuses user metadata that names it, and
// it never appears in ObjectInfo.Metadata.
const MetaSHA256 = lakefsapi.MetaSHA256

// isSHA256Hex reports whether v is a SHA-256 digest as the embedded store
// spells it: 64 lower-case hex digits. Anything else under MetaSHA256
// (written by another tool) is ignored.
func isSHA256Hex(v string) bool {
	if len(v) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// recordedSHA256 returns the well-formed SHA-256 an object carries under
// MetaSHA256, or "".
func recordedSHA256(o lakefsapi.ObjectStats) string {
	if v := metadataFromWire(o.Metadata)[MetaSHA256]; isSHA256Hex(v) {
		return v
	}
	return ""
}

// hashBody learns the SHA-256 and the length of the bytes left in r
// without consuming them, when r can be read twice: a *bytes.Buffer (its
// unread bytes) or an io.Seeker (read to the end, then sought back). ok is
// false for other readers (pipes, network bodies): they are streamed once
// and their object gets no recorded SHA-256.
func hashBody(r io.Reader) (sum string, length int64, ok bool, err error) {
	switch v := r.(type) {
	case *bytes.Buffer:
		s := sha256.Sum256(v.Bytes())
		return hex.EncodeToString(s[:]), int64(v.Len()), true, nil
	case io.Seeker:
		cur, err := v.Seek(0, io.SeekCurrent)
		if err != nil {
			return "", 0, false, nil // not seekable after all (a pipe as *os.File)
		}
		sum, n, err := sha256Of(r)
		if err != nil {
			return "", 0, false, fmt.Errorf("read the body to hash it: %w", err)
		}
		if _, err := v.Seek(cur, io.SeekStart); err != nil {
			return "", 0, false, fmt.Errorf("rewind the body after hashing it: %w", err)
		}
		return sum, n, true, nil
	}
	return "", 0, false, nil
}

// sha256Of reads r to its end and returns the SHA-256 hex of what it read
// and how many bytes that was.
func sha256Of(r io.Reader) (sum string, n int64, err error) {
	h := sha256.New()
	n, err = io.Copy(h, r)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// hashingReader hashes the bytes the transport reads of an upload body, to
// check after the upload that they are the bytes hashed before it. The
// transport may still hold the body when the answer arrives, so the hash
// is locked.
type hashingReader struct {
	r  io.Reader
	mu sync.Mutex
	h  hash.Hash
}

func newHashingReader(r io.Reader) *hashingReader {
	return &hashingReader{r: r, h: sha256.New()}
}

func (t *hashingReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.mu.Lock()
	t.h.Write(p[:n])
	t.mu.Unlock()
	return n, err
}

// body is what to send: t itself, or, when t reads a body that seeks, t
// with a Seek that starts the hash again, so that a send repeated from
// the body's start is hashed as sent.
func (t *hashingReader) body() io.Reader {
	if _, ok := t.r.(io.Seeker); ok {
		return seekingHashReader{t}
	}
	return t
}

type seekingHashReader struct{ *hashingReader }

func (s seekingHashReader) Seek(offset int64, whence int) (int64, error) {
	n, err := s.r.(io.Seeker).Seek(offset, whence)
	s.mu.Lock()
	s.h.Reset()
	s.mu.Unlock()
	return n, err
}

func (t *hashingReader) sum() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return hex.EncodeToString(t.h.Sum(nil))
}

// verifyingReader checks a whole object read against its recorded
// SHA-256: its last Read returns artifacts.ErrIntegrity instead of io.EOF
// when they differ, as the embedded store's reads do for a corrupted blob.
type verifyingReader struct {
	rc   io.ReadCloser
	h    hash.Hash
	want string
	what string // ref:path
	err  error
}

func newVerifyingReader(rc io.ReadCloser, want, what string) *verifyingReader {
	return &verifyingReader{rc: rc, h: sha256.New(), want: want, what: what}
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.rc.Read(p)
	v.h.Write(p[:n])
	if err == io.EOF {
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.want {
			_, path, _ := strings.Cut(v.what, ":")
			err = fmt.Errorf("%w: read %s: its bytes have SHA-256 %s, not the %s recorded under %s when it was written "+
				"(changed by a tool that kept rlpipe's metadata, or the body changed while it was uploaded): "+
				"write it again from a sound copy (`rlpipe put FILE BRANCH:%s`, then commit) or revert the commit that wrote it; "+
				"`rlpipe fsck` lists every damaged object the refs of this lakeFS repository reach",
				artifacts.ErrIntegrity, v.what, got, v.want, MetaSHA256, path)
		}
		v.err = err
	}
	return n, err
}

func (v *verifyingReader) Close() error { return v.rc.Close() }
