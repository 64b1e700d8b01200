package ui

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/internal/bounded"
	"github.com/rlpipe/rlpipe/internal/loopback"
)

// Defaults of the knobs a zero Options leaves unset.
const (
	DefaultAddr            = "127.0.0.1:8080"
	DefaultPollInterval    = time.Second
	DefaultShutdownTimeout = 5 * time.Second
)

// TokenEnv is the environment variable the CLI reads the token from.
const TokenEnv = "RLPIPE_UI_TOKEN"

// tokenCookie carries the token once a browser has presented it.
const tokenCookie = "rlpipe_ui_token"

// Log field names.
const (
	logPath   = "path"
	logStatus = "status"
	logError  = "error"
	logAddr   = "addr"
	logRun    = "run"
)

// ErrNeedToken is returned by New and Listen for an address other than
// loopback without Options.Token.
var ErrNeedToken = errors.New("a UI bound to an address other than loopback needs a token")

//go:embed assets
var assets embed.FS

// Options configure a Server. A nil *Options, or a zero field, means the
// default.
type Options struct {
	// Addr is the address Listen binds (default 127.0.0.1:8080). Any
	// address other than loopback needs a Token.
	Addr string
	// Token, when set, must accompany every request: as ?token= once (the
	// server answers with a cookie and a redirect that drops it from the
	// address bar), as that cookie, or as Authorization: Bearer TOKEN. It
	// is compared in constant time and never logged.
	Token string
	// PollInterval is how often /api/events looks at a run's branch
	// (default 1s).
	PollInterval time.Duration
	// ShutdownTimeout is how long Serve lets requests in flight finish once
	// its ctx ends (default 5s). Event streams end at once.
	ShutdownTimeout time.Duration
	// Logger receives a Debug line per request and Info lines for start
	// and stop (default: none).
	Logger zerolog.Logger
	// EffectiveConfig turns a run's recorded config (run/config.yaml, as
	// the file wrote it) into its effective config, every default filled
	// in, flattened to dotted keys ("trainer.lora.rank": "8"): the run
	// view shows it. The ui cannot parse a pipeline config itself (the
	// kinds are assembled above it); the command passes the function
	// (cli: config.Parse with its registry, then Config.EffectiveKeys).
	// Nil: the run view links to the recorded config only.
	EffectiveConfig func(recorded []byte) (map[string]string, error)
	// Tokenizer finds the tokenizer of a run's policy from the config the
	// run recorded (run/config.yaml; nil when the episode's ref has none):
	// it spells the episodes of a policy that is not an embedded model (an
	// openai policy: vLLM, any OpenAI-compatible server). A nil Speller
	// and nil error: none, and the page shows token ids; an error is shown
	// above them. It is called once per distinct config. The cli passes
	// `rlpipe ui --tokenizer`'s, else the openai policy's tokenizer key's.
	Tokenizer func(recorded []byte) (Speller, error)
}

// String shows the options with the token redacted.
func (o Options) String() string {
	tok := ""
	if o.Token != "" {
		tok = "[redacted]"
	}
	return fmt.Sprintf("ui.Options{Addr: %q, Token: %q, PollInterval: %v, ShutdownTimeout: %v}", o.Addr, tok, o.PollInterval, o.ShutdownTimeout)
}

// GoString keeps the token out of %#v too.
func (o Options) GoString() string { return o.String() }

func (o Options) withDefaults() Options {
	o.Addr = cmp.Or(o.Addr, DefaultAddr)
	o.PollInterval = cmp.Or(o.PollInterval, DefaultPollInterval)
	o.ShutdownTimeout = cmp.Or(o.ShutdownTimeout, DefaultShutdownTimeout)
	return o
}

// Server serves the UI and its JSON API over one store. It is an
// http.Handler; Listen and Serve run it on a socket. It only reads the
// store.
type Server struct {
	st     artifacts.Store
	opts   Options
	ep     loopback.Endpoint
	log    zerolog.Logger
	token  loopback.Digest
	mux    *http.ServeMux
	static http.Handler
	// cache keeps what was read from immutable commits (an iteration's
	// metrics), so that a page polled every second reads each commit once.
	cache *bounded.Map[string, IterationSummary]
	// closing is closed when Serve begins to shut down, ending event streams
	// (which would otherwise hold the shutdown for its whole timeout).
	closing   chan struct{}
	closeOnce sync.Once
	// spellers keeps Options.Tokenizer's speller by recorded config.
	spellMu  sync.Mutex
	spellers map[string]Speller
}

// New returns a Server over st. It fails for an Options.Addr that is
// plainly not loopback (0.0.0.0, :8080, a public IP) without a Token;
// Listen checks again after resolving the name.
func New(st artifacts.Store, opts *Options) (*Server, error) {
	if st == nil {
		return nil, errors.New("ui: store is nil")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	if o.PollInterval < 0 || o.ShutdownTimeout < 0 {
		return nil, errors.New("ui: poll interval and shutdown timeout cannot be negative")
	}
	ep := loopback.Endpoint{Name: "ui", Addr: o.Addr, HasSecret: o.Token != "", Refuse: needToken, ShutdownTimeout: o.ShutdownTimeout}
	if err := ep.Check(); err != nil {
		return nil, err
	}
	if o.Token != "" {
		if err := loopback.CheckToken(TokenEnv, o.Token); err != nil {
			return nil, fmt.Errorf("ui: %w", err)
		}
	}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, fmt.Errorf("ui: embedded assets: %w", err)
	}
	s := &Server{st: st, opts: o, ep: ep, log: o.Logger, token: loopback.DigestOf(o.Token), static: http.FileServerFS(static), cache: bounded.NewMap[string, IterationSummary](4096), closing: make(chan struct{})}
	s.routes()
	return s, nil
}

func needToken(addr string) error {
	return fmt.Errorf("ui: listen %s: %w: set %s to a secret (e.g. $(openssl rand -hex 16)), or bind 127.0.0.1", addr, ErrNeedToken, TokenEnv)
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.Handle("GET /api/runs", answer(s.apiRuns))
	m.Handle("GET /api/runs/{run}", answer(s.apiRun))
	m.Handle("GET /api/runs/{run}/iterations/{n}", answer(s.apiIteration))
	m.Handle("GET /api/runs/{run}/rescorings/{branch}", answer(s.apiRescoring))
	m.Handle("GET /api/branches", answer(s.apiBranches))
	m.Handle("GET /api/log", answer(s.apiLog))
	m.Handle("GET /api/ls", answer(s.apiList))
	m.Handle("GET /api/object", answer(s.apiObject))
	m.Handle("GET /api/table", answer(s.apiTable))
	m.Handle("GET /api/episode", answer(s.apiEpisode))
	m.HandleFunc("GET /api/events", s.apiEvents)
	m.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: the API is read-only; use GET", r.Method, r.URL.Path))
			return
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("no API route %s; see docs/UI.md for the endpoints", r.URL.Path))
	})
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		s.static.ServeHTTP(w, r)
	})
	s.mux = m
}

// ServeHTTP answers the page (/), its assets, and the JSON API (/api/…).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rw := &loopback.Recorder{ResponseWriter: w}
	start := time.Now()
	defer func() {
		if v := recover(); v != nil {
			s.log.Error().Str(logPath, r.URL.Path).Str(logError, fmt.Sprint(v)).Bytes("stack", debug.Stack()).Msg("ui handler panicked")
			if !rw.Wrote {
				writeError(rw, http.StatusInternalServerError, fmt.Sprintf("the UI failed on this request (%v); see its log", v))
			}
		}
		s.log.Debug().Str(logPath, r.URL.Path).Int(logStatus, rw.Status).Dur("took", time.Since(start)).Msg("request")
	}()
	h := rw.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
	if !s.hostAllowed(r) {
		writeError(rw, http.StatusForbidden, fmt.Sprintf("host %q is not this server's loopback address; open the UI at http://127.0.0.1 or http://localhost, or set %s", r.Host, TokenEnv))
		return
	}
	if s.opts.Token != "" {
		if tok := r.URL.Query().Get("token"); tok != "" {
			s.acceptToken(rw, r, tok)
			return
		}
		if !s.authorized(r) {
			writeError(rw, http.StatusUnauthorized, "missing or wrong token: open the UI once as /?token=TOKEN (the value of "+TokenEnv+"), or send Authorization: Bearer TOKEN")
			return
		}
	}
	s.mux.ServeHTTP(rw, r)
}

// hostAllowed guards a server without a token against DNS rebinding: a web
// page on another site whose name resolves to 127.0.0.1 sends its own
// name as Host, which is refused. With a token, the token is the guard.
func (s *Server) hostAllowed(r *http.Request) bool {
	return s.opts.Token != "" || loopback.LoopbackHost(r.Host)
}

// acceptToken checks a ?token= and, if right, sets the cookie and
// redirects to the same URL without it, so the token does not stay in the
// address bar or the history.
func (s *Server) acceptToken(w http.ResponseWriter, r *http.Request, tok string) {
	if !s.token.Matches(tok) {
		writeError(w, http.StatusUnauthorized, "wrong token: use the value of "+TokenEnv+" the server was started with")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: tok, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	q := r.URL.Query()
	q.Del("token")
	u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// authorized accepts the bearer header or the cookie.
func (s *Server) authorized(r *http.Request) bool {
	if got, ok := loopback.Bearer(r); ok {
		return s.token.Matches(got)
	}
	if c, err := r.Cookie(tokenCookie); err == nil {
		return s.token.Matches(c.Value)
	}
	return false
}

// Listen binds Options.Addr. It refuses an address that is not loopback
// (after resolving a host name, and again on the bound socket) unless
// Options.Token is set.
func (s *Server) Listen(ctx context.Context) (net.Listener, error) {
	return s.ep.Listen(ctx)
}

// Serve answers requests on l until ctx ends, then ends event streams,
// stops taking new requests and lets those in flight finish for up to
// Options.ShutdownTimeout. It returns nil after a clean shutdown, an error
// if requests had to be cut off or l failed. It closes l. A Server serves
// once.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	hs.RegisterOnShutdown(func() { s.closeOnce.Do(func() { close(s.closing) }) })
	s.log.Info().Str(logAddr, l.Addr().String()).Bool("token", s.opts.Token != "").Msg("ui listening")
	return s.ep.Serve(ctx, hs, l, func() {
		s.log.Info().Str(logAddr, l.Addr().String()).Msg("ui stopped")
	})
}
