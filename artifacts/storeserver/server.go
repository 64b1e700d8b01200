package storeserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/internal/loopback"
)

// Defaults of the knobs a zero Options leaves unset.
const (
	DefaultAddr            = "127.0.0.1:8001"
	DefaultMaxJSONBytes    = 1 << 20
	DefaultShutdownTimeout = 10 * time.Second
)

// Environment variables `rlpipe store serve` reads the credentials from.
// Workers send the same values as lakectl's LAKECTL_CREDENTIALS_* variables.
const (
	EnvAccessKeyID     = "RLPIPE_STORE_ACCESS_KEY_ID"
	EnvSecretAccessKey = "RLPIPE_STORE_SECRET_ACCESS_KEY"
)

// APIBasePath is where the server answers the lakeFS REST API.
const APIBasePath = "/api/v1"

// Log field names.
const (
	logMethod     = "method"
	logPath       = "path"
	logStatus     = "status"
	logError      = "error"
	logAddr       = "addr"
	logRepository = "repository"
	logTook       = "took"
)

// ErrNeedCredentials is returned by New and Listen for an address other
// than loopback without Options.AccessKeyID and Options.SecretAccessKey.
var ErrNeedCredentials = errors.New("a store server bound to an address other than loopback needs credentials")

// Options configure a Server. A nil *Options, or a zero field, means the
// default.
type Options struct {
	// Addr is the address Listen binds (default 127.0.0.1:8001). Any
	// address other than loopback needs credentials.
	Addr string
	// AccessKeyID and SecretAccessKey, when set, must accompany every
	// request as HTTP Basic auth (what the lakefs:// backend sends from
	// LAKECTL_CREDENTIALS_ACCESS_KEY_ID and
	// LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY). Set both or neither. They
	// are compared in constant time and never logged or echoed.
	AccessKeyID     string
	SecretAccessKey string
	// Repository is the name the store is served under: clients open
	// lakefs://<Repository>. Empty means the store's own name
	// (Store.Repository(ctx).Name). It must be a valid repository name
	// (artifacts.ValidateRepositoryName), since clients refuse others.
	Repository string
	// MaxJSONBytes bounds a JSON request body (default 1 MiB). Object
	// uploads are streamed and not bounded.
	MaxJSONBytes int64
	// ShutdownTimeout is how long Serve lets requests in flight finish
	// once its ctx ends (default 10s).
	ShutdownTimeout time.Duration
	// Logger receives a Debug line per request, a Warn line per answer
	// of 500 or more, and Info lines for start and stop (default: none).
	Logger zerolog.Logger
	// Faults make the server misbehave the way a real lakeFS server does,
	// for tests (the zero value: none).
	Faults Faults
	// BlockStore, when set, makes the server offer presigned transfers
	// as lakeFS over S3 does (GET /config says pre_sign_support: true):
	// getPhysicalAddress and linkPhysicalAddress, and stats with
	// presign=true, whose URLs the BlockStore serves apart from the API.
	// Nil: a lakeFS whose block store cannot presign (the staging
	// endpoints answer 501). A BlockStore serves one Server.
	BlockStore *BlockStore
}

// Faults are lakeFS behaviours a test can turn on.
type Faults struct {
	// MissStagedOnce answers the first read (get, head or stat) of each
	// staged version of an object on a branch with 404, as lakeFS answers
	// a read that races a commit of the branch: the commit drops the
	// staged entry as its new head lands, and the read sees neither. It
	// is the worst case of that race, made deterministic: every staged
	// object a client reads misses once.
	MissStagedOnce bool
	// CommitWindow makes every commit take at least this long, and while
	// a commit of a branch is in flight, a read (get, head or stat) of an
	// object that was staged on it when the commit began answers 404.
	// That is the race as lakeFS has it — misses only while a commit of
	// the branch lands — widened from an instant to a window so that an
	// overlapped loop meets it many times per run. Other reads, and
	// every write, behave as without the fault.
	CommitWindow time.Duration
	// MD5Checksums reports checksums as lakeFS's local block store does:
	// the MD5 hex of the content, in the answers to uploads, copies,
	// stats and lists and as the ETag of reads, in place of the store's
	// own (the embedded store's SHA-256 hex). The SHA-256 the lakefs://
	// backend sends as user metadata (lakefs.MetaSHA256) is then stored
	// and reported like any user metadata, as lakeFS does; without this
	// fault it is neither (see checksum.go). The first description of a
	// content the server did not see uploaded reads it once.
	MD5Checksums bool
}

// String names the faults turned on, for logs ("none" for the zero value).
func (f Faults) String() string {
	var on []string
	if f.MissStagedOnce {
		on = append(on, "miss-staged-once")
	}
	if f.CommitWindow > 0 {
		on = append(on, "commit-window="+f.CommitWindow.String())
	}
	if f.MD5Checksums {
		on = append(on, "md5-checksums")
	}
	if len(on) == 0 {
		return "none"
	}
	return strings.Join(on, ",")
}

// ParseFaults reads the form String writes: a comma-separated list of
// miss-staged-once, commit-window=DURATION and md5-checksums ("" and
// "none" are none).
func ParseFaults(s string) (Faults, error) {
	var f Faults
	if s == "" || s == "none" {
		return f, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, val, hasVal := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case name == "miss-staged-once" && !hasVal:
			f.MissStagedOnce = true
		case name == "md5-checksums" && !hasVal:
			f.MD5Checksums = true
		case name == "commit-window" && hasVal:
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 {
				return Faults{}, fmt.Errorf("fault %q: want a positive duration such as commit-window=20ms", part)
			}
			f.CommitWindow = d
		default:
			return Faults{}, fmt.Errorf("unknown fault %q: want miss-staged-once, commit-window=DURATION or md5-checksums", part)
		}
	}
	return f, nil
}

// String shows the options with the credentials redacted.
func (o Options) String() string {
	key, secret := "", ""
	if o.AccessKeyID != "" {
		key = "[redacted]"
	}
	if o.SecretAccessKey != "" {
		secret = "[redacted]"
	}
	return fmt.Sprintf("storeserver.Options{Addr: %q, AccessKeyID: %q, SecretAccessKey: %q, Repository: %q, MaxJSONBytes: %d, ShutdownTimeout: %v}",
		o.Addr, key, secret, o.Repository, o.MaxJSONBytes, o.ShutdownTimeout)
}

// GoString keeps the credentials out of %#v too.
func (o Options) GoString() string { return o.String() }

func (o Options) withDefaults() Options {
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	if o.MaxJSONBytes == 0 {
		o.MaxJSONBytes = DefaultMaxJSONBytes
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	return o
}

// hasCredentials reports whether requests must authenticate.
func (o Options) hasCredentials() bool { return o.AccessKeyID != "" }

// Server serves one artifacts.Store as one repository of the lakeFS REST
// API (v1). It is an http.Handler; Listen and Serve run it on a socket.
// It is safe for concurrent use and does not close the store.
type Server struct {
	st   artifacts.Store
	opts Options
	ep   loopback.Endpoint
	log  zerolog.Logger
	// repo is the name the repository is served under, defaultBranch its
	// first branch; both are fixed for the life of a store.
	repo          string
	defaultBranch string
	key, secret   loopback.Digest

	missedMu sync.Mutex
	missed   map[string]bool // ref, path and checksum of staged reads that missed
	// committing maps a branch with a commit in flight to the paths it
	// had staged when the commit began (Faults.CommitWindow).
	committing map[string]map[string]bool
	commitMu   sync.Mutex // held by a commit during its window
	misses     atomic.Int64

	md5Mu sync.Mutex
	md5Of map[string]string // Faults.MD5Checksums: the MD5 hex of a content, by the store's checksum
}

// FaultMisses is how many reads a fault has answered 404 so far.
func (s *Server) FaultMisses() int64 { return s.misses.Load() }

// New returns a Server over st. It reads the store's repository once (its
// name and default branch). It fails for an Options.Addr that is plainly
// not loopback (0.0.0.0, :8001, a public IP) without credentials; Listen
// checks again after resolving the name.
func New(ctx context.Context, st artifacts.Store, opts *Options) (*Server, error) {
	if st == nil {
		return nil, errors.New("storeserver: store is nil")
	}
	o := artifacts.ValueOf(opts)
	o = o.withDefaults()
	if o.MaxJSONBytes < 0 || o.ShutdownTimeout < 0 {
		return nil, errors.New("storeserver: max JSON bytes and shutdown timeout cannot be negative")
	}
	if (o.AccessKeyID == "") != (o.SecretAccessKey == "") {
		return nil, fmt.Errorf("storeserver: %w: set both the access key id and the secret access key (%s and %s), or neither", artifacts.ErrInvalid, EnvAccessKeyID, EnvSecretAccessKey)
	}
	ep := loopback.Endpoint{Name: "storeserver", Addr: o.Addr, HasSecret: o.hasCredentials(), Refuse: needCredentials, ShutdownTimeout: o.ShutdownTimeout}
	if err := ep.Check(); err != nil {
		return nil, err
	}
	info, err := st.Repository(ctx)
	if err != nil {
		return nil, fmt.Errorf("storeserver: describe the store: %w", err)
	}
	name := o.Repository
	if name == "" {
		name = info.Name
	}
	if err := artifacts.ValidateRepositoryName(name); err != nil {
		return nil, fmt.Errorf("storeserver: serve the store as repository %q: %w (name it with Options.Repository, `rlpipe store serve --repository NAME`)", name, err)
	}
	if o.BlockStore != nil {
		if err := o.BlockStore.attach(st); err != nil {
			return nil, err
		}
	}
	s := &Server{st: st, opts: o, ep: ep, log: o.Logger, repo: name, defaultBranch: info.DefaultBranch}
	s.key = loopback.DigestOf(o.AccessKeyID)
	s.secret = loopback.DigestOf(o.SecretAccessKey)
	return s, nil
}

func needCredentials(addr string) error {
	return fmt.Errorf("storeserver: listen %s: %w: set %s and %s (e.g. to $(openssl rand -hex 16) each), or bind 127.0.0.1", addr, ErrNeedCredentials, EnvAccessKeyID, EnvSecretAccessKey)
}

// Repository is the name clients open the store by: lakefs://<Repository>.
func (s *Server) Repository() string { return s.repo }

// RequiresAuth reports whether requests must carry the credentials.
func (s *Server) RequiresAuth() bool { return s.opts.hasCredentials() }

// ServeHTTP answers the lakeFS REST API under /api/v1: the endpoints the
// lakefs:// backend sends (see doc.go) and GET /api/v1/healthcheck.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rw := &loopback.Recorder{ResponseWriter: w}
	start := time.Now()
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				// A body that failed mid-stream: cut the connection so
				// the client sees an error, not a short object.
				s.log.Debug().Str(logMethod, r.Method).Str(logPath, r.URL.Path).Msg("response aborted")
				panic(v)
			}
			s.log.Error().Str(logMethod, r.Method).Str(logPath, r.URL.Path).Str(logError, fmt.Sprint(v)).Bytes("stack", debug.Stack()).Msg("store server handler panicked")
			if !rw.Wrote {
				writeError(rw, http.StatusInternalServerError, fmt.Sprintf("the store server failed on %s %s (%v); see its log", r.Method, r.URL.Path, v))
			}
		}
		ev := s.log.Debug()
		if rw.Status >= 500 {
			ev = s.log.Warn().Str(logError, rw.Message)
		}
		ev.Str(logMethod, r.Method).Str(logPath, r.URL.Path).Int(logStatus, rw.Status).Dur(logTook, time.Since(start)).Msg("request")
	}()
	if !s.hostAllowed(r) {
		writeError(rw, http.StatusForbidden, fmt.Sprintf("host %q is not a loopback address: this server has no credentials, so it answers only http://127.0.0.1 or http://localhost (start it with %s and %s to serve other names)", r.Host, EnvAccessKeyID, EnvSecretAccessKey))
		return
	}
	api, ok := strings.CutPrefix(r.URL.EscapedPath(), APIBasePath)
	if ok && api == "/healthcheck" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		rw.WriteHeader(http.StatusNoContent)
		return
	}
	if !s.authorized(r) {
		rw.Header().Set("WWW-Authenticate", `Basic realm="rlpipe store", charset="UTF-8"`)
		writeError(rw, http.StatusUnauthorized, "missing or wrong credentials: send HTTP Basic auth with the access key id and secret the server was started with "+
			"(a worker sets LAKECTL_CREDENTIALS_ACCESS_KEY_ID and LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY to the values of "+EnvAccessKeyID+" and "+EnvSecretAccessKey+")")
		return
	}
	if !ok || (api != "" && api[0] != '/') {
		writeError(rw, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s: this server answers the lakeFS API under %s", r.Method, r.URL.Path, APIBasePath))
		return
	}
	s.route(rw, r, api)
}

// hostAllowed guards a server without credentials against DNS rebinding:
// a web page on another site whose name resolves to 127.0.0.1 sends its
// own name as Host, which is refused. With credentials, they are the guard.
func (s *Server) hostAllowed(r *http.Request) bool {
	return s.opts.hasCredentials() || loopback.LoopbackHost(r.Host)
}

// authorized checks HTTP Basic credentials, comparing both in constant
// time (loopback.Digest), the second even when the first is wrong.
func (s *Server) authorized(r *http.Request) bool {
	if !s.opts.hasCredentials() {
		return true
	}
	key, secret, ok := r.BasicAuth()
	if !ok {
		return false
	}
	k, sec := s.key.Matches(key), s.secret.Matches(secret)
	return k && sec
}

// Listen binds Options.Addr. It refuses an address that is not loopback
// (after resolving a host name, and again on the bound socket) unless the
// server has credentials.
func (s *Server) Listen(ctx context.Context) (net.Listener, error) {
	return s.ep.Listen(ctx)
}

// Serve answers requests on l until ctx ends, then stops taking new ones
// and lets those in flight finish for up to Options.ShutdownTimeout. It
// returns nil after a clean shutdown, an error if requests had to be cut
// off or l failed. It closes l.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	s.log.Info().Str(logAddr, l.Addr().String()).Str(logRepository, s.repo).Bool("auth", s.opts.hasCredentials()).Msg("store server listening")
	return s.ep.Serve(ctx, hs, l, func() {
		ev := s.log.Info().Str(logAddr, l.Addr().String())
		if s.opts.Faults != (Faults{}) {
			ev = ev.Str("faults", s.opts.Faults.String()).Int64("fault_misses", s.FaultMisses())
		}
		ev.Msg("store server stopped")
	})
}
