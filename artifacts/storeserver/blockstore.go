package storeserver

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
)

// DefaultPresignTTL is how long a presigned URL lasts unless
// BlockStoreOptions.TTL says otherwise (lakeFS's default too).
const DefaultPresignTTL = 15 * time.Minute

// The query parameters of a presigned URL. The signature is an
// HMAC-SHA256 of the method, the block and the expiry under the block
// store's secret, so a URL cannot be turned into another.
const (
	queryExpires   = "X-Rlpipe-Expires"
	querySignature = "X-Rlpipe-Signature"
)

// blockScheme is the scheme of the physical addresses the block store
// hands out: block://<id>.
const blockScheme = "block://"

// BlockStoreOptions configure a BlockStore.
type BlockStoreOptions struct {
	// Dir is where uploaded blocks wait until they are linked (required).
	// A linked block moves into the store and leaves Dir.
	Dir string
	// URL is the base URL clients reach the block store at; SetURL sets
	// it once the server is listening.
	URL string
	// TTL is the lifetime of a presigned URL (default DefaultPresignTTL).
	TTL time.Duration
	// Faults make the block store refuse the URLs it signs.
	Faults BlockFaults
}

// BlockFaults make a BlockStore refuse its own URLs, as S3 refuses a URL
// that expired or whose signing credentials were rotated.
type BlockFaults struct {
	// ExpiredURLs signs every URL with an expiry already past.
	ExpiredURLs bool
	// WrongSignatures signs every URL with a key other than the one it
	// is checked with.
	WrongSignatures bool
	// DamageUploads flips the first byte of every upload as it arrives,
	// as a transfer that corrupts data would; the ETag is of the bytes
	// stored.
	DamageUploads bool
}

// BlockStore stands in for the object store behind a lakeFS server (S3,
// GCS, Azure Blob) when the Server hands out presigned URLs
// (Options.BlockStore): an http.Handler of its own, served apart from the
// API, that takes uploads to the URLs getPhysicalAddress signs and serves
// reads of the URLs a stat with presign=true signs. The API server is
// then not in the data path: it signs, links and describes.
//
// An upload goes to Dir as <id>.part and becomes the block <id> only when
// its last byte has arrived; a block is staged on a branch only when a
// client links it (linkPhysicalAddress), which moves its bytes into the
// store. An upload cut off, or never linked, stages nothing (lakeFS
// collects such orphans in its block store; here they stay in Dir).
// Refusals are answered as S3 answers them: 403 with an XML error whose
// Code is AccessDenied (expired) or SignatureDoesNotMatch.
type BlockStore struct {
	dir    string
	ttl    time.Duration
	faults BlockFaults
	key    []byte

	urlMu sync.Mutex
	url   string

	mu      sync.Mutex
	blocks  map[string]string // complete blocks not yet linked: id → MD5 hex
	st      artifacts.Store   // the store reads are served from (set by New)
	uploads atomic.Int64
	reads   atomic.Int64
}

// NewBlockStore makes a block store keeping uploads in opts.Dir.
func NewBlockStore(opts BlockStoreOptions) (*BlockStore, error) {
	if opts.Dir == "" {
		return nil, errors.New("storeserver: block store: no directory (BlockStoreOptions.Dir)")
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("storeserver: block store: %w", err)
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultPresignTTL
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("storeserver: block store: make a signing key: %w", err)
	}
	return &BlockStore{dir: opts.Dir, ttl: opts.TTL, faults: opts.Faults, key: key, url: strings.TrimRight(opts.URL, "/"), blocks: map[string]string{}}, nil
}

// SetURL sets the base URL clients reach the block store at.
func (b *BlockStore) SetURL(u string) {
	b.urlMu.Lock()
	b.url = strings.TrimRight(u, "/")
	b.urlMu.Unlock()
}

// URL is the base URL clients reach the block store at.
func (b *BlockStore) URL() string {
	b.urlMu.Lock()
	defer b.urlMu.Unlock()
	return b.url
}

// Uploads is how many uploads the block store has received whole, and
// Reads how many presigned reads it has served whole.
func (b *BlockStore) Uploads() int64 { return b.uploads.Load() }

// Reads is how many presigned reads the block store has served whole.
func (b *BlockStore) Reads() int64 { return b.reads.Load() }

// Pending is how many complete uploads wait to be linked.
func (b *BlockStore) Pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.blocks)
}

// attach makes st the store reads are served from.
func (b *BlockStore) attach(st artifacts.Store) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.st != nil && b.st != st {
		return errors.New("storeserver: the block store serves another server's store already: give each server its own")
	}
	b.st = st
	return nil
}

// sign returns a presigned URL for method on the block store's path kind/id
// and its expiry.
func (b *BlockStore) sign(method, kind, id string) (string, int64, error) {
	base := b.URL()
	if base == "" {
		return "", 0, errorf(http.StatusInternalServerError, "the block store has no URL to sign: set BlockStoreOptions.URL or call BlockStore.SetURL")
	}
	exp := time.Now().Add(b.ttl).Unix()
	if b.faults.ExpiredURLs {
		exp = time.Now().Add(-time.Minute).Unix()
	}
	key := b.key
	if b.faults.WrongSignatures {
		key = append([]byte("rotated:"), key...)
	}
	q := url.Values{queryExpires: {strconv.FormatInt(exp, 10)}, querySignature: {signature(key, method, kind, id, exp)}}
	return base + "/" + kind + "/" + id + "?" + q.Encode(), exp, nil
}

func signature(key []byte, method, kind, id string, exp int64) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s\n%s/%s\n%d", method, kind, id, exp)
	return hex.EncodeToString(m.Sum(nil))
}

// Kinds of block-store paths: uploads to link, and reads of stored objects.
const (
	kindUpload = "blocks"
	kindRead   = "objects"
)

// ServeHTTP answers PUT /blocks/<id> and GET /objects/<token> on the URLs
// the Server signed.
func (b *BlockStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind, id, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch {
	case !ok || id == "" || strings.Contains(id, "/"):
		s3Error(w, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.")
		return
	case kind == kindUpload && r.Method == http.MethodPut, kind == kindRead && (r.Method == http.MethodGet || r.Method == http.MethodHead):
	default:
		s3Error(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "The specified method is not allowed against this resource.")
		return
	}
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	q := r.URL.Query()
	exp, err := strconv.ParseInt(q.Get(queryExpires), 10, 64)
	if err != nil {
		s3Error(w, http.StatusForbidden, "AccessDenied", "Request is not presigned: it has no expiry.")
		return
	}
	if time.Now().Unix() > exp {
		s3Error(w, http.StatusForbidden, "AccessDenied", "Request has expired")
		return
	}
	got, _ := hex.DecodeString(q.Get(querySignature))
	want, _ := hex.DecodeString(signature(b.key, method, kind, id, exp))
	if !hmac.Equal(got, want) {
		s3Error(w, http.StatusForbidden, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided.")
		return
	}
	if kind == kindUpload {
		b.upload(w, r, id)
		return
	}
	b.read(w, r, id)
}

// upload receives a block: to <id>.part, renamed to <id> after its last byte.
func (b *BlockStore) upload(w http.ResponseWriter, r *http.Request, id string) {
	if r.ContentLength < 0 {
		s3Error(w, http.StatusLengthRequired, "MissingContentLength", "You must provide the Content-Length HTTP header.")
		return
	}
	part := filepath.Join(b.dir, id+".part")
	f, err := os.Create(part)
	if err != nil {
		s3Error(w, http.StatusInternalServerError, "InternalError", "write the block: "+err.Error())
		return
	}
	h := md5.New()
	var body io.Reader = r.Body
	if b.faults.DamageUploads {
		body = &flipFirst{r: body}
	}
	n, err := io.Copy(io.MultiWriter(f, h), body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != r.ContentLength {
		err = fmt.Errorf("got %d of %d bytes", n, r.ContentLength)
	}
	if err == nil {
		err = os.Rename(part, filepath.Join(b.dir, id))
	}
	if err != nil {
		// Cut off (a client killed mid-upload): no block, nothing to link.
		os.Remove(part)
		s3Error(w, http.StatusBadRequest, "IncompleteBody", "The upload did not complete: "+err.Error())
		return
	}
	sum := hex.EncodeToString(h.Sum(nil))
	b.mu.Lock()
	b.blocks[id] = sum
	b.mu.Unlock()
	b.uploads.Add(1)
	w.Header().Set("ETag", `"`+sum+`"`)
	w.WriteHeader(http.StatusOK)
}

// readToken names an object version for a presigned read: its ref, path
// and the store's checksum of it, so that the URL reads those bytes or
// nothing.
func readToken(ref, path, checksum string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(ref + "\x00" + path + "\x00" + checksum))
}

// read serves the object version a read token names.
func (b *BlockStore) read(w http.ResponseWriter, r *http.Request, token string) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	parts := strings.Split(string(raw), "\x00")
	b.mu.Lock()
	st := b.st
	b.mu.Unlock()
	if err != nil || len(parts) != 3 || st == nil {
		s3Error(w, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.")
		return
	}
	ref, path, checksum := parts[0], parts[1], parts[2]
	rc, info, err := st.GetObject(r.Context(), ref, path)
	if err == nil && info.Checksum != checksum {
		rc.Close()
		err = artifacts.ErrObjectNotFound
	}
	if err != nil {
		s3Error(w, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.")
		return
	}
	defer rc.Close()
	objectHeaders(w.Header(), info, info.Size)
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return
	}
	if err := send(&call{w: w, r: r}, rc, http.StatusOK, info.Size, "read "+ref+":"+path); err != nil {
		s3Error(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	b.reads.Add(1)
}

// take removes the complete block id and returns it opened, with its MD5
// hex; the caller closes and removes the file once its bytes are stored.
func (b *BlockStore) take(id string) (*os.File, string, error) {
	b.mu.Lock()
	sum, ok := b.blocks[id]
	delete(b.blocks, id)
	b.mu.Unlock()
	if !ok {
		return nil, "", errBlockMissing
	}
	f, err := os.Open(filepath.Join(b.dir, id))
	if err != nil {
		return nil, "", err
	}
	return f, sum, nil
}

// putBack returns a block that could not be linked, so that the link can
// be sent again.
func (b *BlockStore) putBack(id, sum string) {
	b.mu.Lock()
	b.blocks[id] = sum
	b.mu.Unlock()
}

// discard removes a linked block's file.
func (b *BlockStore) discard(f *os.File) {
	f.Close()
	os.Remove(f.Name())
}

var errBlockMissing = errors.New("no complete upload")

// newBlockID names a new block.
func newBlockID() (string, error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(id[:]), nil
}

// s3Error answers as S3 does: a status and an XML Error with a Code and a
// Message, which never holds the signature or the key.
func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message></Error>\n", code, xmlEscape(msg))
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// flipFirst flips the first byte read through it (BlockFaults.DamageUploads).
type flipFirst struct {
	r    io.Reader
	done bool
}

func (f *flipFirst) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if n > 0 && !f.done {
		p[0] ^= 0xff
		f.done = true
	}
	return n, err
}
