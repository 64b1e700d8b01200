package openenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rlpipe/rlpipe/environments"
)

// ObservationOptions say what of an observation the policy reads.
type ObservationOptions struct {
	// Field is the observation's field shown to the policy (a string as
	// it is, anything else as JSON). Default: the observation's one field
	// besides metadata when it is a string, else the observation as JSON
	// without metadata.
	Field string `json:"field,omitempty"`
}

// Remote is one OpenEnv server as the environments of a stage share it:
// its address (a URL, or a Server rlpipe runs), its action schema, read
// once, and idle sockets, one per episode in flight, reused by the next.
type Remote struct {
	// Action and Observation shape the frames.
	Action      ActionOptions
	Observation ObservationOptions
	// Reset is added to each reset's data (beside seed and episode_id).
	Reset map[string]any

	addr address
	// timeout bounds a request's reply and GET /schema (0: none).
	timeout time.Duration

	// pool holds the action schema and the idle sockets, shared by the
	// Remotes on the same server with the same token: one stage's idle
	// socket serves another's episode rather than holding a session of
	// the server's max_concurrent_envs.
	pool *pool
}

// pool is the action schema of one server, read once, and idle sockets
// to it.
type pool struct {
	mu     sync.Mutex
	schema *schemas
	idle   []*conn
}

// address is where a Remote's server is: it may start one.
type address interface {
	// base is the server's http://HOST:PORT, started when it must be.
	base(ctx context.Context) (string, error)
	// header is what each request carries (a token).
	header() (map[string][]string, error)
	// hold and release count the episodes using the server.
	hold()
	release()
	// explain adds what the address knows of a failure of a request to
	// base sent at sent (zero for a reset) to a message: a server's exit
	// and stderr. blamed is true when a server rlpipe runs died during
	// that step: the environment crashed on the episode's action.
	explain(msg, base string, sent time.Time) (_ string, blamed bool)
}

// NewEnv makes an Env for one episode on r.
func (r *Remote) NewEnv() environments.Env { return &Env{r: r} }

// session returns an idle socket to the server (reused true) or dials
// one, and the action schema.
func (r *Remote) session(ctx context.Context, fresh bool) (c *conn, s *schemas, reused bool, err error) {
	base, err := r.addr.base(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	ws := wsURL(base)
	pl := r.pool
	pl.mu.Lock()
	var stale []*conn
	for len(pl.idle) > 0 && c == nil && !fresh {
		n := len(pl.idle)
		if pl.idle[n-1].url == ws {
			c = pl.idle[n-1]
		} else { // to a server that has since restarted on another port
			stale = append(stale, pl.idle[n-1])
		}
		pl.idle = pl.idle[:n-1]
	}
	s = pl.schema
	pl.mu.Unlock()
	for _, old := range stale {
		old.close()
	}
	if c != nil && s != nil {
		c.timeout = r.timeout // it may be another Remote's
		return c, s, true, nil
	}
	h, err := r.addr.header()
	if err == nil && s == nil {
		s, err = fetchSchema(ctx, base, h, r.timeout)
	}
	if err != nil {
		if c != nil {
			r.put(c)
		}
		return nil, nil, false, err
	}
	pl.mu.Lock()
	pl.schema = s
	pl.mu.Unlock()
	if c != nil {
		c.timeout = r.timeout
		return c, s, true, nil
	}
	if c, err = dial(ctx, ws, h); err != nil {
		return nil, nil, false, err
	}
	c.base, c.timeout = base, r.timeout
	return c, s, false, nil
}

// schemaDigest reads the server's /schema now, keeps it as the action
// schema of its episodes, and returns its digest.
func (r *Remote) schemaDigest(ctx context.Context) (string, error) {
	base, err := r.addr.base(ctx)
	if err != nil {
		return "", err
	}
	h, err := r.addr.header()
	if err != nil {
		return "", err
	}
	s, err := fetchSchema(ctx, base, h, r.timeout)
	if err != nil {
		return "", err
	}
	r.pool.mu.Lock()
	r.pool.schema = s
	r.pool.mu.Unlock()
	return s.digest, nil
}

// put returns a healthy socket to the idle list.
func (r *Remote) put(c *conn) {
	r.pool.mu.Lock()
	r.pool.idle = append(r.pool.idle, c)
	r.pool.mu.Unlock()
}

// closeIdle closes the idle sockets.
func (r *Remote) closeIdle() {
	r.pool.mu.Lock()
	idle := r.pool.idle
	r.pool.idle = nil
	r.pool.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
}

// Close closes the idle sockets and stops a server r runs.
func (r *Remote) Close() {
	r.closeIdle()
	if v, ok := r.addr.(*servedBy); ok {
		v.s.Close()
	}
}

// wsURL is base's /ws, ws:// for http:// and wss:// for https://.
func wsURL(base string) string {
	if rest, ok := strings.CutPrefix(base, "https://"); ok {
		return "wss://" + rest + "/ws"
	}
	return "ws://" + strings.TrimPrefix(base, "http://") + "/ws"
}

// Env is one episode on an OpenEnv server over its own WebSocket.
type Env struct {
	r      *Remote
	c      *conn
	s      *schemas
	id     string
	steps  int
	holden bool
}

var _ environments.Env = (*Env)(nil)

// Reset starts episode id: {"type": "reset", "data": {"seed": SEED,
// "episode_id": id, ...Remote.Reset}} with SEED the top 31 bits of
// environments.Seed(id), and returns the first observation.
func (e *Env) Reset(ctx context.Context, id string) (string, error) {
	if err := e.End(); err != nil {
		return "", err
	}
	data := map[string]any{"seed": environments.Seed(id) >> 33, "episode_id": id}
	for k, v := range e.r.Reset {
		data[k] = v
	}
	b, err := json.Marshal(data)
	if err != nil {
		return "", fmt.Errorf("reset episode %s: rl_options reset: cannot be sent as JSON: %w", id, err)
	}
	e.r.addr.hold()
	e.holden = true
	// A reused socket may have been closed by the server while idle (its
	// pings unanswered): then the reset goes again on a fresh one.
	for fresh := false; ; fresh = true {
		c, s, reused, err := e.r.session(ctx, fresh)
		if err != nil {
			return "", err
		}
		e.c, e.s, e.id, e.steps = c, s, id, 0
		o, err := e.exchange(ctx, frame{Type: "reset", Data: b}, "reset", reused)
		if err == errStale {
			continue
		}
		if err != nil {
			return "", err
		}
		return o.text, nil
	}
}

// Step sends the action built from reply. An action the schema (or the
// server, VALIDATION_ERROR) rejects is answered with an observation
// saying why, the episode going on.
func (e *Env) Step(ctx context.Context, reply string) (environments.Step, error) {
	if e.c == nil {
		return environments.Step{}, fmt.Errorf("openenv: Step without an episode: call Reset first")
	}
	e.steps++
	action, feedback := e.s.build(e.r.Action, reply)
	if action == nil {
		return environments.Step{Observation: feedback, Info: map[string]any{"openenv_invalid_action": feedback}}, nil
	}
	o, err := e.exchange(ctx, frame{Type: "step", Data: action}, fmt.Sprintf("step %d", e.steps), false)
	if err != nil {
		return environments.Step{}, err
	}
	if o.feedback != "" {
		return environments.Step{Observation: o.feedback, Info: map[string]any{"openenv_invalid_action": o.feedback}}, nil
	}
	return environments.Step{Observation: o.text, Reward: o.reward, Done: o.done, Info: o.info}, nil
}

// End returns the socket for the next episode (or closes it when the
// episode failed) and releases the server.
func (e *Env) End() error {
	if e.c != nil {
		e.r.put(e.c)
		e.c = nil
	}
	if e.holden {
		e.holden = false
		e.r.addr.release()
	}
	return nil
}

// fail closes the socket of a failed episode.
func (e *Env) fail() {
	if e.c != nil {
		e.c.close()
		e.c = nil
	}
}

// observed is a reply, read.
type observed struct {
	text     string
	reward   float64
	done     bool
	info     map[string]any
	feedback string // a VALIDATION_ERROR, for the policy
}

// errStale is a reused socket that failed: the caller tries a fresh one.
var errStale = errors.New("stale socket")

// exchange sends f and reads its observation; what names the request in
// messages ("step 2"). On a reused socket (stale), a socket failure is
// errStale.
func (e *Env) exchange(ctx context.Context, f frame, what string, stale bool) (observed, error) {
	where := fmt.Sprintf("%s of episode %s on %s", what, e.id, e.c.url)
	var sent time.Time
	if f.Type == "step" {
		sent = time.Now()
	}
	c := e.c
	reply, err := c.roundTrip(ctx, f)
	if err != nil {
		e.fail()
		if err == errTimedOut {
			return observed{}, &Error{ErrTimeout, fmt.Sprintf("%s: no reply within %v: the environment hangs on this request; fix it or raise rl_options request_timeout_s", where, c.timeout)}
		}
		if se, ok := err.(*socketError); ok {
			if stale {
				return observed{}, errStale
			}
			e.r.closeIdle() // likely to the same dead server
			msg, blamed := e.r.addr.explain(fmt.Sprintf("%s: the connection failed: %v", where, se.err), c.base, sent)
			if blamed {
				return observed{}, &Error{ErrEnvironment, msg}
			}
			return observed{}, &Error{ErrConnection, msg}
		}
		return observed{}, err
	}
	o, err := e.read(reply, where)
	if err != nil {
		e.fail()
	}
	return o, err
}

// read decodes a reply frame.
func (e *Env) read(reply []byte, where string) (observed, error) {
	var f frame
	if err := json.Unmarshal(tolerate(reply), &f); err != nil || f.Type == "" {
		return observed{}, &Error{ErrProtocol, fmt.Sprintf("%s: the reply is not an OpenEnv frame: %.200q: is this an OpenEnv server's /ws?", where, reply)}
	}
	switch f.Type {
	case "observation":
		return e.observation(f.Data, where)
	case "error":
		var ed struct {
			Message string `json:"message"`
			Code    string `json:"code"`
			Errors  []struct {
				Loc []any  `json:"loc"`
				Msg string `json:"msg"`
			} `json:"errors"`
		}
		_ = json.Unmarshal(f.Data, &ed)
		switch ed.Code {
		case "VALIDATION_ERROR":
			var parts []string
			for _, v := range ed.Errors {
				loc := make([]string, len(v.Loc))
				for i, l := range v.Loc {
					loc[i] = fmt.Sprint(l)
				}
				parts = append(parts, fmt.Sprintf("%s: %s", strings.Join(loc, "."), v.Msg))
			}
			if len(parts) == 0 {
				parts = []string{ed.Message}
			}
			return observed{feedback: "invalid action: " + strings.Join(parts, "; ")}, nil
		case "CAPACITY_REACHED":
			return observed{}, &Error{ErrCapacity, fmt.Sprintf("%s: the server is at capacity: %s: run fewer episodes at once (the episodes stage's concurrency) or raise the server's max_concurrent_envs", where, ed.Message)}
		case "EXECUTION_ERROR":
			return observed{}, &Error{ErrEnvironment, fmt.Sprintf("%s: the environment failed: %s", where, ed.Message)}
		case "":
			return observed{}, &Error{ErrProtocol, fmt.Sprintf("%s: an error frame without a code: %.200q", where, reply)}
		default:
			return observed{}, &Error{ErrEnvironment, fmt.Sprintf("%s: the server answered %s: %s", where, ed.Code, ed.Message)}
		}
	default:
		return observed{}, &Error{ErrProtocol, fmt.Sprintf("%s: a frame of type %q where an observation was due: is this an OpenEnv server's /ws?", where, f.Type)}
	}
}

// observation reads {"observation": {...}, "reward": R, "done": D,
// "metadata": {...}}.
func (e *Env) observation(data json.RawMessage, where string) (observed, error) {
	var d struct {
		Observation map[string]json.RawMessage `json:"observation"`
		Reward      json.RawMessage            `json:"reward"`
		Done        bool                       `json:"done"`
		Metadata    map[string]any             `json:"metadata"`
	}
	if err := json.Unmarshal(data, &d); err != nil || d.Observation == nil {
		return observed{}, &Error{ErrProtocol, fmt.Sprintf("%s: an observation frame without an observation object: %.200s", where, data)}
	}
	o := observed{done: d.Done, info: map[string]any{}}
	for k, v := range d.Metadata {
		o.info[k] = v
	}
	if md, ok := d.Observation["metadata"]; ok {
		var m map[string]any
		if json.Unmarshal(md, &m) == nil {
			for k, v := range m {
				if _, dup := o.info[k]; !dup {
					o.info[k] = v
				}
			}
		}
	}
	r, err := reward(d.Reward)
	switch {
	case err != nil:
		return observed{}, &Error{ErrProtocol, fmt.Sprintf("%s: %v", where, err)}
	case math.IsNaN(r) || math.IsInf(r, 0):
		return observed{}, &Error{ErrNonFinite, fmt.Sprintf("%s: the reward is %v, not a finite number: fix the environment's reward", where, r)}
	}
	o.reward = r
	if rw := strings.TrimSpace(string(d.Reward)); rw == "" || rw == "null" {
		o.info["openenv_reward_null"] = true
	}
	if len(o.info) == 0 {
		o.info = nil
	}
	o.text, err = e.text(d.Observation, where)
	return o, err
}

// reward reads a reward: null (or absent) is 0; a bool is 1 or 0.
func reward(raw json.RawMessage) (float64, error) {
	var v any
	if len(raw) == 0 {
		return 0, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, fmt.Errorf("reward %s: %v", raw, err)
	}
	switch v := v.(type) {
	case nil:
		return 0, nil
	case bool:
		if v {
			return 1, nil
		}
		return 0, nil
	case float64:
		return v, nil
	case string:
		if tok, ok := strings.CutPrefix(v, nonFinite); ok {
			switch tok {
			case "NaN":
				return math.NaN(), nil
			case "Infinity":
				return math.Inf(1), nil
			}
			return math.Inf(-1), nil
		}
	}
	return 0, fmt.Errorf("reward %s: want a number, a bool or null", raw)
}

// text is what the policy reads of an observation.
func (e *Env) text(obs map[string]json.RawMessage, where string) (string, error) {
	if f := e.r.Observation.Field; f != "" {
		v, ok := obs[f]
		if !ok {
			keys := make([]string, 0, len(obs))
			for k := range obs {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			return "", &Error{ErrEnvironment, fmt.Sprintf("%s: the observation has no field %q (it has %s): fix rl_options observation: {field: ...}", where, f, strings.Join(keys, ", "))}
		}
		return jsonText(v), nil
	}
	rest := map[string]json.RawMessage{}
	for k, v := range obs {
		if k != "metadata" {
			rest[k] = v
		}
	}
	if len(rest) == 1 {
		for _, v := range rest {
			var s string
			if json.Unmarshal(v, &s) == nil {
				return s, nil
			}
		}
	}
	b, err := json.Marshal(rest)
	if err != nil {
		return "", &Error{ErrProtocol, fmt.Sprintf("%s: the observation cannot be written back as JSON: %v", where, err)}
	}
	return string(b), nil
}

// jsonText is a JSON string's value, or other JSON as it is.
func jsonText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}

// Starts is how many times r's server was started (0 for a URL).
func (r *Remote) Starts() int {
	if v, ok := r.addr.(*servedBy); ok {
		return v.s.Starts()
	}
	return 0
}

// Start starts r's server (when rlpipe serves it) and reads its action
// schema, so that the first episode does not wait for them.
func (r *Remote) Start(ctx context.Context) error {
	c, _, _, err := r.session(ctx, false)
	if err != nil {
		return err
	}
	r.put(c)
	return nil
}

// WSURL is r's server's /ws (starting a served server): for a peer
// client to drive the same server.
func (r *Remote) WSURL(ctx context.Context) string {
	base, err := r.addr.base(ctx)
	if err != nil {
		return ""
	}
	return wsURL(base)
}
