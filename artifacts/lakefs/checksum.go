package lakefs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/crc32"
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

// hashBody learns the SHA-256, the CRC-32C and the length of the bytes
// left in r without consuming them, when r can be read twice: a
// *bytes.Buffer (its unread bytes) or an io.Seeker (read to the end, then
// sought back). ok is false for other readers (pipes, network bodies):
// they are streamed once and their object gets no recorded SHA-256.
func hashBody(r io.Reader) (h bodyHash, ok bool, err error) {
	switch v := r.(type) {
	case *bytes.Buffer:
		h, err = hashOf(bytes.NewReader(v.Bytes()))
		return h, err == nil, err
	case io.Seeker:
		cur, err := v.Seek(0, io.SeekCurrent)
		if err != nil {
			return bodyHash{}, false, nil // not seekable after all (a pipe as *os.File)
		}
		h, err := hashOf(r)
		if err != nil {
			return bodyHash{}, false, fmt.Errorf("read the body to hash it: %w", err)
		}
		if _, err := v.Seek(cur, io.SeekStart); err != nil {
			return bodyHash{}, false, fmt.Errorf("rewind the body after hashing it: %w", err)
		}
		return h, true, nil
	}
	return bodyHash{}, false, nil
}

// bodyHash is what hashBody learns of a body: the SHA-256 hex recorded
// with the object, and the CRC-32C its upload is checked against.
type bodyHash struct {
	sum    string
	crc    uint32
	length int64
}

// hashOf reads r to its end, hashing it.
func hashOf(r io.Reader) (bodyHash, error) {
	h, c := sha256.New(), crc32.New(castagnoli)
	n, err := io.Copy(io.MultiWriter(h, c), r)
	return bodyHash{sum: hex.EncodeToString(h.Sum(nil)), crc: c.Sum32(), length: n}, err
}

// sha256Of reads r to its end and returns the SHA-256 hex of what it read
// and how many bytes that was.
func sha256Of(r io.Reader) (sum string, n int64, err error) {
	h := sha256.New()
	n, err = io.Copy(h, r)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sentReader checks that the bytes the transport reads of an upload body
// are the bytes hashed before it, by their CRC-32C: the SHA-256 recorded
// with the object was taken then, and a body that changed since would be
// stored under the digest of other bytes. A CRC runs at tens of GB/s, a
// SHA-256 at about 1.5: the upload is not slowed by a second SHA-256 pass
// (one chance in 2³² of missing a random change). The transport may
// still hold the body when the answer arrives, so the CRC is locked.
type sentReader struct {
	r   io.Reader
	mu  sync.Mutex
	crc uint32
}

func newSentReader(r io.Reader) *sentReader { return &sentReader{r: r} }

func (t *sentReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.mu.Lock()
	t.crc = crc32.Update(t.crc, castagnoli, p[:n])
	t.mu.Unlock()
	return n, err
}

// body is what to send: t itself, or, when t reads a body that seeks, t
// with a Seek that starts the CRC again, so that a send repeated from
// the body's start is checked as sent.
func (t *sentReader) body() io.Reader {
	if _, ok := t.r.(io.Seeker); ok {
		return seekingSentReader{t}
	}
	return t
}

type seekingSentReader struct{ *sentReader }

func (s seekingSentReader) Seek(offset int64, whence int) (int64, error) {
	n, err := s.r.(io.Seeker).Seek(offset, whence)
	s.mu.Lock()
	s.crc = 0
	s.mu.Unlock()
	return n, err
}

// changed says whether the bytes sent differ from those hashed in h,
// and if so how, for an error message.
func (t *sentReader) changed(h bodyHash) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.crc == h.crc {
		return "", false
	}
	return fmt.Sprintf("CRC-32C %08x before the upload, %08x as sent", h.crc, t.crc), true
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
