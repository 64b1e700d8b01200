package openenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
)

// Options are the openenv environment's rl_options: a server at URL, or
// one rlpipe serves (Serve); exactly one of them.
//
//	rl_env: openenv
//	rl_options:
//	  serve: {app: arith_env.server:app, python: ../../.venv-openenv}
type Options struct {
	// URL is a running server: http://HOST:PORT (or its ws://HOST:PORT/ws).
	URL string `json:"url,omitempty"`
	// TokenEnv names the environment variable holding a token for a
	// server that wants one: each request carries "Header: VALUE" (the
	// variable's value, never written anywhere). Header defaults to
	// Authorization, and a bare token there becomes "Bearer TOKEN".
	TokenEnv string `json:"token_env,omitempty"`
	Header   string `json:"header,omitempty"`
	// Serve starts the server: an OpenEnv app under uvicorn.
	Serve *ServeOptions `json:"serve,omitempty"`
	// Action, Observation and Reset shape the frames (see Remote).
	Action      ActionOptions      `json:"action,omitempty"`
	Observation ObservationOptions `json:"observation,omitempty"`
	Reset       map[string]any     `json:"reset,omitempty"`
	// RequestTimeoutS bounds each request's reply (a reset, a step) and
	// GET /schema, in seconds (0: DefaultRequestTimeout). A request
	// without a reply in time fails its episode (ErrTimeout).
	RequestTimeoutS float64 `json:"request_timeout_s,omitempty"`
}

// DefaultRequestTimeout bounds a request's reply when request_timeout_s
// is not set.
const DefaultRequestTimeout = 300 * time.Second

// RLEnv is the openenv environment as an episodes stage's rl_env: each
// episode a session on the server's /ws.
var RLEnv = environments.Typed("openenv", openRLEnv)

// openRLEnv checks the options and returns the maker. With url:, it
// reads the server's GET /schema, whose digest enters the version (a
// server that is down or is not OpenEnv fails Open); with serve:, nothing
// starts until an episode's Reset. The environments of every stage with
// the same options share one Remote (and its server) in the process.
func openRLEnv(o *Options, dir string) (environments.Maker, string, error) {
	if o == nil || (o.URL == "") == (o.Serve == nil) {
		return nil, "", fmt.Errorf("openenv needs a server: set rl_options url: http://HOST:PORT (a running server) or serve: {app: module:app} (rlpipe starts it), one of them")
	}
	r, err := shared(o, dir)
	if err != nil {
		return nil, "", err
	}
	version, err := versionOf(o, dir)
	if err != nil {
		return nil, "", err
	}
	if o.URL != "" {
		d, err := r.schemaDigest(context.Background())
		if err != nil {
			return nil, "", err
		}
		version = strings.TrimPrefix(version+" schema="+d, " ")
	}
	return func(tables.Prompt) (environments.Env, error) { return r.NewEnv(), nil }, version, nil
}

// versionOf is what of o enters the stage's cache key beyond the options
// themselves: request_timeout_s when set, and for serve: the digest of
// the app's code (appDigest). A url: server's code is outside rlpipe's
// view: Open adds the digest of its /schema instead.
func versionOf(o *Options, dir string) (string, error) {
	var parts []string
	if o.RequestTimeoutS > 0 {
		parts = append(parts, fmt.Sprintf("request_timeout_s=%g", o.RequestTimeoutS))
	}
	if o.Serve != nil {
		s, err := NewServer(*o.Serve, dir)
		if err != nil {
			return "", err
		}
		d, err := s.appDigest()
		if err != nil {
			return "", err
		}
		if d != "" {
			parts = append(parts, "app="+d)
		}
	}
	return strings.Join(parts, " "), nil
}

// The process's Remotes by options and directory, and its served
// servers by serve options and directory: Remotes that differ in how
// they shape frames share a server.
var shares struct {
	mu      sync.Mutex
	remotes map[string]*Remote
	servers map[string]*served
	pools   map[string]*pool
}

// key is v as JSON, for the maps of shares. It fails on options JSON
// cannot hold (a NaN or ±Inf number in reset:).
func key(v any, dir string) (string, error) {
	b, err := json.Marshal(struct {
		V   any
		Dir string
	}{v, dir})
	if err != nil {
		return "", fmt.Errorf("openenv: rl_options cannot be written as JSON: %w", err)
	}
	return string(b), nil
}

// shared returns the process's Remote for o, made on first use.
func shared(o *Options, dir string) (*Remote, error) {
	k, err := key(o, dir)
	if err != nil {
		return nil, err
	}
	shares.mu.Lock()
	defer shares.mu.Unlock()
	if r := shares.remotes[k]; r != nil {
		return r, nil
	}
	r := &Remote{Action: o.Action, Observation: o.Observation, Reset: o.Reset, timeout: DefaultRequestTimeout}
	if o.RequestTimeoutS > 0 {
		r.timeout = time.Duration(o.RequestTimeoutS * float64(time.Second))
	}
	hdr := &tokenHeader{name: o.Header, env: o.TokenEnv}
	if o.Serve != nil {
		sk, err := key(o.Serve, dir)
		if err != nil {
			return nil, err
		}
		v := shares.servers[sk]
		if v == nil {
			s, err := NewServer(*o.Serve, dir)
			if err != nil {
				return nil, err
			}
			idle := 300 * time.Second
			if o.Serve.IdleStopS != 0 {
				idle = time.Duration(o.Serve.IdleStopS * float64(time.Second))
			}
			v = &served{s: s, idle: idle}
			if shares.servers == nil {
				shares.servers = map[string]*served{}
			}
			shares.servers[sk] = v
		}
		r.addr = &servedBy{v, hdr}
	} else {
		base, err := baseURL(o.URL)
		if err != nil {
			return nil, err
		}
		r.addr = &fixed{url: base, tokenHeader: hdr}
	}
	pk, err := key(struct {
		URL, TokenEnv, Header string
		Serve                 *ServeOptions
	}{o.URL, o.TokenEnv, o.Header, o.Serve}, dir)
	if err != nil {
		return nil, err
	}
	if r.pool = shares.pools[pk]; r.pool == nil {
		r.pool = &pool{}
		if shares.pools == nil {
			shares.pools = map[string]*pool{}
		}
		shares.pools[pk] = r.pool
	}
	if shares.remotes == nil {
		shares.remotes = map[string]*Remote{}
	}
	shares.remotes[k] = r
	return r, nil
}

// baseURL is a server's http(s)://HOST:PORT from what rl_options url says.
func baseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("url %q: want http://HOST:PORT (or ws://HOST:PORT/ws)", raw)
	}
	switch u.Scheme {
	case "http", "ws":
		u.Scheme = "http"
	case "https", "wss":
		u.Scheme = "https"
	default:
		return "", fmt.Errorf("url %q: scheme %q: want http, https, ws or wss", raw, u.Scheme)
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/ws")
	u.RawQuery, u.Fragment = "", ""
	return u.String(), nil
}

// tokenHeader is the header a token rides in.
type tokenHeader struct{ name, env string }

func (t *tokenHeader) header() (map[string][]string, error) {
	h := http.Header{}
	if t.env == "" {
		return h, nil
	}
	v := os.Getenv(t.env)
	if v == "" {
		return nil, &Error{ErrUnreachable, fmt.Sprintf("the token for the openenv server: $%s (rl_options token_env) is not set: export it", t.env)}
	}
	name := t.name
	if name == "" {
		name = "Authorization"
		if !strings.Contains(v, " ") {
			v = "Bearer " + v
		}
	}
	h.Set(name, v)
	return h, nil
}

// fixed is a server at a URL.
type fixed struct {
	url string
	*tokenHeader
}

func (f *fixed) base(context.Context) (string, error) { return f.url, nil }
func (*fixed) hold()                                  {}
func (*fixed) release()                               {}
func (*fixed) explain(msg, _ string, _ time.Time) (string, bool) {
	return msg + "; the next episode reconnects", false
}

// served is a Server rlpipe runs, shared by Remotes; it stops after
// idle without episodes.
type served struct {
	s    *Server
	idle time.Duration

	mu    sync.Mutex
	live  int
	timer *time.Timer
}

// servedBy is a Remote's address on a served server.
type servedBy struct {
	*served
	*tokenHeader
}

func (v *served) base(ctx context.Context) (string, error) { return v.s.Base(ctx) }
func (v *served) explain(msg, base string, sent time.Time) (string, bool) {
	return v.s.Explain(msg, base, sent)
}

func (v *served) hold() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.live++
	if v.timer != nil {
		v.timer.Stop()
		v.timer = nil
	}
}

func (v *served) release() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.live--
	if v.live > 0 {
		return
	}
	if v.idle < 0 {
		v.s.Close()
		return
	}
	v.timer = time.AfterFunc(v.idle, func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		if v.live == 0 {
			v.s.Close()
		}
	})
}

// SharedRemote is the process's Remote for o and dir, the one the
// makers RLEnv.Open returns for the same options use.
func SharedRemote(o *Options, dir string) (*Remote, error) { return shared(o, dir) }
