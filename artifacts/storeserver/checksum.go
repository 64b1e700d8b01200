package storeserver

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/internal/lakefsapi"
)

// The checksums the server reports are the store's own (the embedded
// store's SHA-256 hex), so that an object has the same checksum through
// the server as in the store. The lakefs:// backend sends the SHA-256 of
// what it uploads as user metadata (lakefsapi.MetaSHA256), for lakeFS
// servers whose checksums are something else. Here it says nothing the
// store's checksum does not, so the server neither stores nor reports it:
// the same bytes written directly or through the server are then the same
// object version to diff and merge, and a key put directly into the store
// never stands in for the store's checksum.
//
// Faults.MD5Checksums makes the server the lakeFS whose checksums are
// something else: it reports the MD5 hex of the content, as lakeFS's
// local block store does, and stores and reports MetaSHA256 as user
// metadata like any other, as lakeFS does. The MD5 of a content is learnt
// as an upload streams through the server (hashed on its way into the
// store) or, for an object the server has not seen written, by reading it
// once. It is remembered by the store's checksum, which depends on the
// content alone, so a content is read at most once for the life of the
// server (and the memory grows with the number of contents described:
// the option is for tests).

// describe is the ObjectStats the server answers for the object the
// store describes as info at ref:path.
func (s *Server) describe(ctx context.Context, ref, path string, info artifacts.ObjectInfo, userMetadata bool) (lakefsapi.ObjectStats, error) {
	sum, err := s.wireChecksum(ctx, ref, path, info.Checksum)
	if err != nil {
		return lakefsapi.ObjectStats{}, err
	}
	info.Checksum = sum
	if _, ok := info.Metadata[lakefsapi.MetaSHA256]; ok && !s.opts.Faults.MD5Checksums {
		info.Metadata = withoutKey(info.Metadata, lakefsapi.MetaSHA256)
	}
	return fromObjectInfo(info, userMetadata), nil
}

// storedMetadata is the user metadata of an upload as the store keeps it.
func (s *Server) storedMetadata(md map[string]string) map[string]string {
	if _, ok := md[lakefsapi.MetaSHA256]; ok && !s.opts.Faults.MD5Checksums {
		return withoutKey(md, lakefsapi.MetaSHA256)
	}
	return md
}

// withoutKey returns a copy of md without key (nil when nothing is left):
// the store's own map is not to be changed.
func withoutKey(md map[string]string, key string) map[string]string {
	var out map[string]string
	for k, v := range md {
		if k == key {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(md))
		}
		out[k] = v
	}
	return out
}

// wireChecksum is the checksum to report for the object the store
// describes with checksum at ref:path.
func (s *Server) wireChecksum(ctx context.Context, ref, path, checksum string) (string, error) {
	if !s.opts.Faults.MD5Checksums {
		return checksum, nil
	}
	if sum, ok := s.knownMD5(checksum); ok {
		return sum, nil
	}
	rc, info, err := s.st.GetObject(ctx, ref, path)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	h := md5.New()
	if _, err := io.Copy(h, rc); err != nil {
		return "", fmt.Errorf("read %s:%s for its MD5: %w", ref, path, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	s.rememberMD5(info.Checksum, sum)
	if info.Checksum != checksum {
		// Overwritten since it was described. lakefs:// clients send
		// reads again on a 503.
		return "", errorf(http.StatusServiceUnavailable, "%s:%s changed while the server computed its MD5; send the request again", ref, path)
	}
	return sum, nil
}

// md5Reader hashes an upload body on its way into the store, when the
// server reports MD5 checksums; it is nil otherwise.
type md5Reader struct {
	r io.Reader
	h hash.Hash
}

func (s *Server) newMD5Reader(r io.Reader) *md5Reader {
	if !s.opts.Faults.MD5Checksums {
		return nil
	}
	return &md5Reader{r: r, h: md5.New()}
}

func (m *md5Reader) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	m.h.Write(p[:n])
	return n, err
}

func (m *md5Reader) sum() string { return hex.EncodeToString(m.h.Sum(nil)) }

func (s *Server) knownMD5(checksum string) (string, bool) {
	s.md5Mu.Lock()
	defer s.md5Mu.Unlock()
	sum, ok := s.md5Of[checksum]
	return sum, ok
}

func (s *Server) rememberMD5(checksum, sum string) {
	s.md5Mu.Lock()
	defer s.md5Mu.Unlock()
	if s.md5Of == nil {
		s.md5Of = map[string]string{}
	}
	s.md5Of[checksum] = sum
}
