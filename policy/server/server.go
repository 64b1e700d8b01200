package server

import (
	"cmp"
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

	"github.com/rlpipe/rlpipe/internal/loopback"
	"github.com/rlpipe/rlpipe/policy"
)

// Defaults of the knobs a zero Options leaves unset.
const (
	DefaultModel           = "policy"
	DefaultAddr            = "127.0.0.1:0"
	DefaultMaxBodyBytes    = 16 << 20
	DefaultMaxSamples      = 4096
	DefaultShutdownTimeout = 30 * time.Second
)

// Log field names.
const (
	logPath    = "path"
	logStatus  = "status"
	logAdapter = "adapter"
	logError   = "error"
	logAddr    = "addr"
)

// Options configure a Server. A nil *Options, or a zero field, means the
// default.
type Options struct {
	// Model is the name the base model is served as: /v1/models lists it
	// and requests name it, or an adapter, in their model field (default
	// "policy"). Clients set the same name in openai.Options.Model.
	Model string
	// Addr is the address Listen binds (default 127.0.0.1:0, a free
	// loopback port). Any address other than loopback needs a Token.
	Addr string
	// Token, when set, is the bearer token every request but /health must
	// carry (Authorization: Bearer TOKEN); it is compared in constant time.
	// Read it from the environment; it is never logged.
	Token string
	// MaxBodyBytes caps a request body (default 16 MiB); a larger one is
	// answered 413.
	MaxBodyBytes int64
	// MaxSamples caps n times the number of prompts of one request
	// (default 4096).
	MaxSamples int
	// ShutdownTimeout is how long Serve lets requests in flight finish
	// once its ctx ends, before it cuts them off (default 30s).
	ShutdownTimeout time.Duration
	// Logger receives Debug lines per request and Info lines per adapter
	// and for start and stop (default: none).
	Logger zerolog.Logger
}

// String shows the options with the token redacted.
func (o Options) String() string {
	tok := ""
	if o.Token != "" {
		tok = "[redacted]"
	}
	return fmt.Sprintf("server.Options{Model: %q, Addr: %q, Token: %q, MaxBodyBytes: %d, MaxSamples: %d, ShutdownTimeout: %v}",
		o.Model, o.Addr, tok, o.MaxBodyBytes, o.MaxSamples, o.ShutdownTimeout)
}

// GoString keeps the token out of %#v too.
func (o Options) GoString() string { return o.String() }

func (o Options) withDefaults() Options {
	o.Model = cmp.Or(o.Model, DefaultModel)
	o.Addr = cmp.Or(o.Addr, DefaultAddr)
	o.MaxBodyBytes = cmp.Or(o.MaxBodyBytes, DefaultMaxBodyBytes)
	o.MaxSamples = cmp.Or(o.MaxSamples, DefaultMaxSamples)
	o.ShutdownTimeout = cmp.Or(o.ShutdownTimeout, DefaultShutdownTimeout)
	return o
}

// ErrNeedToken is returned by New and Listen for an address other than
// loopback without Options.Token.
var ErrNeedToken = errors.New("a policy server bound to an address other than loopback needs a token")

// Server serves a policy.Policy over the OpenAI API. It is an
// http.Handler; Listen and Serve run it on a socket.
type Server struct {
	p      policy.Policy
	loader policy.AdapterLoader // nil: the policy loads no adapters
	opts   Options
	ep     loopback.Endpoint
	log    zerolog.Logger
	token  loopback.Digest

	amu      sync.RWMutex          // guards adapters; held by loads and unloads
	adapters policy.LoadedAdapters // loaded through the server, oldest first

	ids     atomic.Uint64 // response ids
	created int64         // the models' creation time, Unix seconds
}

// New returns a Server for p; if p is also a policy.AdapterLoader the
// server loads and unloads adapters. It fails for an Options.Addr that is
// plainly not loopback (0.0.0.0, :8000, a public IP) without a Token.
func New(p policy.Policy, opts *Options) (*Server, error) {
	if p == nil {
		return nil, errors.New("server: policy is nil")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	if o.MaxBodyBytes < 0 || o.MaxSamples < 0 || o.ShutdownTimeout < 0 {
		return nil, errors.New("server: max body bytes, max samples and shutdown timeout cannot be negative")
	}
	ep := loopback.Endpoint{Name: "server", Addr: o.Addr, HasSecret: o.Token != "", Refuse: needToken, ShutdownTimeout: o.ShutdownTimeout}
	if err := ep.Check(); err != nil {
		return nil, err
	}
	s := &Server{p: p, opts: o, ep: ep, log: o.Logger, token: loopback.DigestOf(o.Token), created: time.Now().Unix()}
	s.loader, _ = p.(policy.AdapterLoader)
	return s, nil
}

// unauthorized is a 401's message: what to send, and where an rlpipe
// client and server read the token.
const unauthorized = "missing or wrong bearer token: send the token this server was started with (rlpipe policy serve reads it from RLPIPE_POLICY_TOKEN) as Authorization: Bearer TOKEN; " +
	"an rlpipe client sends the variable its policy's key_env names (e.g. key_env: RLPIPE_POLICY_TOKEN, with that variable exported)"

func needToken(addr string) error {
	return fmt.Errorf("server: listen %s: %w: set Options.Token (rlpipe policy serve reads it from RLPIPE_POLICY_TOKEN), or bind 127.0.0.1", addr, ErrNeedToken)
}

// Model is the name the base model is served as.
func (s *Server) Model() string { return s.opts.Model }

// Adapters lists the adapters loaded through the server, oldest first.
func (s *Server) Adapters() []string {
	s.amu.RLock()
	defer s.amu.RUnlock()
	return s.adapters.Names()
}

// ServeHTTP answers the OpenAI API: POST /v1/completions,
// /v1/chat/completions, /v1/load_lora_adapter and
// /v1/unload_lora_adapter; GET /v1/models, /v1/models/{id} and /health.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rw := &loopback.Recorder{ResponseWriter: w}
	start := time.Now()
	defer func() {
		if v := recover(); v != nil {
			s.log.Error().Str(logPath, r.URL.Path).Str(logError, fmt.Sprint(v)).Bytes("stack", debug.Stack()).Msg("policy server handler panicked")
			if !rw.Wrote {
				writeError(rw, errInternal(fmt.Sprintf("the policy server failed on this request (%v); see its log", v)))
			}
		}
		s.log.Debug().Str(logPath, r.URL.Path).Int(logStatus, rw.Status).Dur("took", time.Since(start)).Msg("request")
	}()
	if r.URL.Path == "/health" {
		if !method(rw, r, http.MethodGet) {
			return
		}
		rw.WriteHeader(http.StatusOK)
		return
	}
	if !s.authorized(r) {
		writeError(rw, &apiError{status: http.StatusUnauthorized, Message: unauthorized,
			Type: "authentication_error", Code: "invalid_api_key"})
		return
	}
	switch r.URL.Path {
	case "/v1/completions":
		if method(rw, r, http.MethodPost) {
			s.generate(rw, r, false)
		}
	case "/v1/chat/completions":
		if method(rw, r, http.MethodPost) {
			s.generate(rw, r, true)
		}
	case "/v1/models":
		if method(rw, r, http.MethodGet) {
			s.models(rw)
		}
	case "/v1/load_lora_adapter":
		if method(rw, r, http.MethodPost) {
			s.loadAdapter(rw, r)
		}
	case "/v1/unload_lora_adapter":
		if method(rw, r, http.MethodPost) {
			s.unloadAdapter(rw, r)
		}
	default:
		if id, ok := strings.CutPrefix(r.URL.Path, "/v1/models/"); ok && id != "" {
			if method(rw, r, http.MethodGet) {
				s.modelOne(rw, id)
			}
			return
		}
		writeError(rw, &apiError{status: http.StatusNotFound, Type: "not_found_error",
			Message: fmt.Sprintf("no route %s %s; the policy server answers /v1/completions, /v1/chat/completions, /v1/models, /v1/models/{id}, /v1/load_lora_adapter, /v1/unload_lora_adapter and /health", r.Method, r.URL.Path)})
	}
}

func method(w http.ResponseWriter, r *http.Request, want string) bool {
	if r.Method == want || (want == http.MethodGet && r.Method == http.MethodHead) {
		return true
	}
	w.Header().Set("Allow", want)
	writeError(w, &apiError{status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
		Message: fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, want)})
	return false
}

// authorized compares the bearer token in constant time (loopback.Digest).
func (s *Server) authorized(r *http.Request) bool {
	if s.opts.Token == "" {
		return true
	}
	got, ok := loopback.Bearer(r)
	return ok && s.token.Matches(got)
}

// Listen binds Options.Addr. It refuses an address that is not loopback
// (after resolving a host name, and again on the bound socket) unless
// Options.Token is set.
func (s *Server) Listen(ctx context.Context) (net.Listener, error) {
	return s.ep.Listen(ctx)
}

// Serve answers requests on l until ctx ends, then stops taking new ones,
// lets those in flight finish for up to Options.ShutdownTimeout. It
// returns nil after a clean shutdown, an error if requests had to be cut
// off or l failed. It closes l.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
	}
	s.log.Info().Str(logAddr, l.Addr().String()).Str("model", s.opts.Model).Bool("token", s.opts.Token != "").Msg("policy server listening")
	return s.ep.Serve(ctx, hs, l, func() {
		s.log.Info().Str(logAddr, l.Addr().String()).Msg("policy server stopped")
	})
}
