package openenv_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/websocket"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/openenv"
	"github.com/rlpipe/rlpipe/policy"
)

// replies are what the fake server answers a step whose message is the
// key: the frames a broken or strict OpenEnv server sends.
var replies = map[string]string{
	"garbage":   `not json at all`,
	"untyped":   `{"data": {}}`,
	"wrongtype": `{"type": "state", "data": {"step_count": 1}}`,
	"noobs":     `{"type": "observation", "data": {"reward": 1}}`,
	"exec":      `{"type": "error", "data": {"message": "division by zero", "code": "EXECUTION_ERROR"}}`,
	"session":   `{"type": "error", "data": {"message": "no session", "code": "SESSION_ERROR"}}`,
	"nocode":    `{"type": "error", "data": {"message": "?"}}`,
	"invalid": `{"type": "error", "data": {"message": "Invalid message", "code": "VALIDATION_ERROR", "errors": [` +
		`{"type": "missing", "loc": ["message"], "msg": "Field required"}, {"type": "too_long", "loc": ["message", 0], "msg": "String too long"}]}}`,
	"nan":    `{"type": "observation", "data": {"observation": {"text": "NaN"}, "reward": NaN, "done": false}}`,
	"inf":    `{"type": "observation", "data": {"observation": {"text": "x"}, "reward": -Infinity, "done": false}}`,
	"null":   `{"type": "observation", "data": {"observation": {"text": "nothing", "metadata": {"k": 1}}, "reward": null, "done": true}}`,
	"true":   `{"type": "observation", "data": {"observation": {"text": "yes"}, "reward": true, "done": true, "metadata": {"k": 2}}}`,
	"int":    `{"type": "observation", "data": {"observation": {"text": "two", "n": 2}, "reward": 2, "done": true}}`,
	"string": `{"type": "observation", "data": {"observation": {"text": "s"}, "reward": "high", "done": true}}`,
}

// fake is a hand-written OpenEnv server on loopback: /schema says the
// action is {"message": string}; /ws answers reset with "ready" and a
// step with replies[message] ("drop" closes the socket, "hang" never
// answers), at most
// capacity sessions at once (CAPACITY_REACHED beyond, as OpenEnv does).
func fake(t *testing.T, capacity int) *httptest.Server {
	t.Helper()
	var mu sync.Mutex
	active := 0
	mux := http.NewServeMux()
	mux.HandleFunc("/schema", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" && r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"action": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"], "additionalProperties": false}}`))
	})
	mux.Handle("/ws", websocket.Handler(func(ws *websocket.Conn) {
		defer ws.Close()
		mu.Lock()
		active++
		n := active
		mu.Unlock()
		defer func() { mu.Lock(); active--; mu.Unlock() }()
		if n > capacity {
			websocket.Message.Send(ws, `{"type":"error","data":{"message":"Server at capacity: 1/1 sessions active. Cannot accept new connections.","code":"CAPACITY_REACHED","active_sessions":1,"max_sessions":1}}`)
			return
		}
		for {
			var msg string
			if websocket.Message.Receive(ws, &msg) != nil {
				return
			}
			var f struct {
				Type string `json:"type"`
				Data struct {
					Message string `json:"message"`
				} `json:"data"`
			}
			json.Unmarshal([]byte(msg), &f)
			switch {
			case f.Type == "close":
				return
			case f.Type == "reset":
				websocket.Message.Send(ws, `{"type": "observation", "data": {"observation": {"text": "ready"}, "reward": 0.0, "done": false}}`)
			case f.Data.Message == "drop":
				return
			case f.Data.Message == "hang": // never answers; reads on
				continue
			case replies[f.Data.Message] != "":
				websocket.Message.Send(ws, replies[f.Data.Message])
			default:
				websocket.Message.Send(ws, `{"type": "observation", "data": {"observation": {"text": "echo `+f.Data.Message+`"}, "reward": 0.5, "done": false}}`)
			}
		}
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// open makes an environment of the openenv kind for o.
func open(t *testing.T, o *openenv.Options) environments.Env {
	t.Helper()
	mk, _, err := openenv.RLEnv.Open(o, "")
	if err != nil {
		t.Fatal(err)
	}
	env, err := mk(tables.Prompt{PromptID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.End() })
	return env
}

// TestFrames: each reply frame of a server, read: rewards of every JSON
// kind, VALIDATION_ERROR as feedback, and the faults as errors of their
// kind with what to do next.
func TestFrames(t *testing.T) {
	srv := fake(t, 100)
	ws := "ws://" + strings.TrimPrefix(srv.URL, "http://") + "/ws"
	at := "step 1 of episode e on " + ws + ": "
	for _, c := range []struct {
		name   string
		action string
		want   environments.Step
		err    string
		kind   error
		infra  bool
	}{
		{"a float reward", "hi", environments.Step{Observation: "echo hi", Reward: 0.5}, "", nil, false},
		{"a null reward counts 0 and is recorded", "null",
			environments.Step{Observation: "nothing", Done: true, Info: map[string]any{"k": float64(1), "openenv_reward_null": true}}, "", nil, false},
		{"a bool reward", "true", environments.Step{Observation: "yes", Reward: 1, Done: true, Info: map[string]any{"k": float64(2)}}, "", nil, false},
		{"an int reward, an observation of two fields as JSON", "int", environments.Step{Observation: `{"n":2,"text":"two"}`, Reward: 2, Done: true}, "", nil, false},
		{"VALIDATION_ERROR is feedback", "invalid", environments.Step{Observation: "invalid action: message: Field required; message.0: String too long",
			Info: map[string]any{"openenv_invalid_action": "invalid action: message: Field required; message.0: String too long"}}, "", nil, false},
		{"garbage", "garbage", environments.Step{}, at + `the reply is not an OpenEnv frame: "not json at all": is this an OpenEnv server's /ws?`, openenv.ErrProtocol, true},
		{"a frame without a type", "untyped", environments.Step{}, at + `the reply is not an OpenEnv frame: "{\"data\": {}}": is this an OpenEnv server's /ws?`, openenv.ErrProtocol, true},
		{"a frame of another type", "wrongtype", environments.Step{}, at + `a frame of type "state" where an observation was due: is this an OpenEnv server's /ws?`, openenv.ErrProtocol, true},
		{"an observation frame without one", "noobs", environments.Step{}, at + `an observation frame without an observation object: {"reward": 1}`, openenv.ErrProtocol, true},
		{"a reward of another kind", "string", environments.Step{}, at + `reward "high": want a number, a bool or null`, openenv.ErrProtocol, true},
		{"an error frame without a code", "nocode", environments.Step{}, at + `an error frame without a code: "{\"type\": \"error\", \"data\": {\"message\": \"?\"}}"`, openenv.ErrProtocol, true},
		{"EXECUTION_ERROR", "exec", environments.Step{}, at + "the environment failed: division by zero", openenv.ErrEnvironment, false},
		{"another error code", "session", environments.Step{}, at + "the server answered SESSION_ERROR: no session", openenv.ErrEnvironment, false},
		{"a NaN reward", "nan", environments.Step{}, at + "the reward is NaN, not a finite number: fix the environment's reward", openenv.ErrNonFinite, false},
		{"an infinite reward", "inf", environments.Step{}, at + "the reward is -Inf, not a finite number: fix the environment's reward", openenv.ErrNonFinite, false},
		{"the server drops the socket", "drop", environments.Step{}, at + "the connection failed: EOF; the next episode reconnects", openenv.ErrConnection, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := open(t, &openenv.Options{URL: srv.URL})
			if obs, err := env.Reset(context.Background(), "e"); err != nil || obs != "ready" {
				t.Fatalf("Reset: %q, %v", obs, err)
			}
			st, err := env.Step(context.Background(), c.action)
			if c.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if b, w := jsonOf(st), jsonOf(c.want); b != w {
					t.Errorf("Step(%q):\n got %s\nwant %s", c.action, b, w)
				}
				return
			}
			if err == nil || err.Error() != c.err {
				t.Fatalf("Step(%q): %v\nwant %s", c.action, err, c.err)
			}
			if !errors.Is(err, c.kind) || errors.Is(err, environments.ErrInfra) != c.infra {
				t.Errorf("%v: want %v, infra %v", err, c.kind, c.infra)
			}
			// The episode failed; the next one, on the same server, goes on.
			env2 := open(t, &openenv.Options{URL: srv.URL})
			if obs, err := env2.Reset(context.Background(), "next"); err != nil || obs != "ready" {
				t.Errorf("the next episode's Reset: %q, %v", obs, err)
			}
		})
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// openErr is Open's error for o.
func openErr(o *openenv.Options) error {
	_, _, err := openenv.RLEnv.Open(o, "")
	return err
}

// TestServerDown: a url: server that is not there fails Open (its
// /schema enters the version), naming the URL and the next step; one
// that goes down after Open fails the episode's Reset as infra.
func TestServerDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	err := openErr(&openenv.Options{URL: url})
	want := `read the action schema at ` + url + `/schema: Get "` + url + `/schema": dial tcp ` + strings.TrimPrefix(url, "http://") +
		`: connect: connection refused: start the server (or let rlpipe start it with rl_options serve:) and check rl_options url`
	if err == nil || err.Error() != want {
		t.Fatalf("Open: %v\nwant %s", err, want)
	}
	if !errors.Is(err, openenv.ErrUnreachable) || !errors.Is(err, environments.ErrInfra) {
		t.Errorf("%v: want ErrUnreachable, infra", err)
	}
	// Down after Open, through the runner: an infra_error episode, not a
	// failed call.
	up := fake(t, 100)
	env := open(t, &openenv.Options{URL: up.URL})
	up.Close()
	r, _ := environments.NewRunner(environments.Scripted(func([]policy.Message) string { return "x" }), &environments.RunnerOptions{MaxTurns: 2})
	res, err := r.Run(context.Background(), env, environments.Episode{ID: "e"})
	ws := "ws://" + strings.TrimPrefix(up.URL, "http://") + "/ws"
	want = "reset: connect to the openenv server at " + ws + ": dial tcp " + strings.TrimPrefix(up.URL, "http://") +
		": connect: connection refused: start the server (or let rlpipe start it with rl_options serve:) and check rl_options url"
	if err != nil || res.Trajectory.Status != tables.StatusInfraError || *res.Trajectory.Error != want {
		t.Errorf("run: %v, status %s (%v); want infra_error with\n%s", err, res.Trajectory.Status, *res.Trajectory.Error, want)
	}
}

// TestNotOpenEnv: a server without OpenEnv's /schema is refused before
// any episode plays on it.
func TestNotOpenEnv(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	err := openErr(&openenv.Options{URL: srv.URL})
	want := "read the action schema at " + srv.URL + "/schema: HTTP 404 404 page not found\n: is this an OpenEnv server (openenv.core's create_app)?"
	if err == nil || err.Error() != want || !errors.Is(err, openenv.ErrUnreachable) {
		t.Fatalf("Open: %v\nwant %s", err, want)
	}
}

// TestCapacity: a session beyond the server's max_concurrent_envs is
// CAPACITY_REACHED, an infra error saying what to change.
func TestCapacity(t *testing.T) {
	srv := fake(t, 1)
	first := open(t, &openenv.Options{URL: srv.URL})
	if _, err := first.Reset(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	second := open(t, &openenv.Options{URL: srv.URL})
	_, err := second.Reset(context.Background(), "b")
	ws := "ws://" + strings.TrimPrefix(srv.URL, "http://") + "/ws"
	want := "reset of episode b on " + ws + ": the server is at capacity: Server at capacity: 1/1 sessions active. Cannot accept new connections.: " +
		"run fewer episodes at once (the episodes stage's concurrency) or raise the server's max_concurrent_envs"
	if err == nil || err.Error() != want {
		t.Fatalf("Reset: %v\nwant %s", err, want)
	}
	if !errors.Is(err, openenv.ErrCapacity) || !errors.Is(err, environments.ErrInfra) {
		t.Errorf("%v: want ErrCapacity, infra", err)
	}
}

// TestToken: the token comes from the variable token_env names, as a
// bearer token; an unset variable says to export it.
func TestToken(t *testing.T) {
	srv := fake(t, 100)
	t.Setenv("OPENENV_TEST_TOKEN", "s3cret")
	if _, err := open(t, &openenv.Options{URL: srv.URL, TokenEnv: "OPENENV_TEST_TOKEN"}).Reset(context.Background(), "e"); err != nil {
		t.Errorf("with the token: %v", err)
	}
	t.Setenv("OPENENV_TEST_TOKEN", "wrong")
	_, err := open(t, &openenv.Options{URL: srv.URL, TokenEnv: "OPENENV_TEST_TOKEN", Header: "X-Other"}).Reset(context.Background(), "e")
	if err != nil {
		t.Errorf("another header: %v", err)
	}
	err = openErr(&openenv.Options{URL: srv.URL, TokenEnv: "OPENENV_TEST_TOKEN_UNSET"})
	want := "the token for the openenv server: $OPENENV_TEST_TOKEN_UNSET (rl_options token_env) is not set: export it"
	if err == nil || err.Error() != want {
		t.Errorf("Open: %v\nwant %s", err, want)
	}
}

// TestRequestTimeout: a server that never answers a step fails the
// episode within request_timeout_s as infra, saying which request and
// what to raise; one that never answers GET /schema fails Open so.
func TestRequestTimeout(t *testing.T) {
	srv := fake(t, 100)
	opts := &openenv.Options{URL: srv.URL, RequestTimeoutS: 0.2}
	env := open(t, opts)
	if obs, err := env.Reset(context.Background(), "e"); err != nil || obs != "ready" {
		t.Fatalf("Reset: %q, %v", obs, err)
	}
	_, err := env.Step(context.Background(), "hang")
	ws := "ws://" + strings.TrimPrefix(srv.URL, "http://") + "/ws"
	want := "step 1 of episode e on " + ws + ": no reply within 200ms: the environment hangs on this request; fix it or raise rl_options request_timeout_s"
	if err == nil || err.Error() != want {
		t.Fatalf("Step: %v\nwant %s", err, want)
	}
	if !errors.Is(err, openenv.ErrTimeout) || !errors.Is(err, environments.ErrInfra) {
		t.Errorf("%v: want ErrTimeout, infra", err)
	}
	// The next episode goes on, on a fresh socket.
	if obs, err := open(t, opts).Reset(context.Background(), "next"); err != nil || obs != "ready" {
		t.Errorf("the next episode's Reset: %q, %v", obs, err)
	}

	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hung.Close)
	err = openErr(&openenv.Options{URL: hung.URL, RequestTimeoutS: 0.2})
	want = "read the action schema at " + hung.URL + "/schema: Get \"" + hung.URL + "/schema\": context deadline exceeded (Client.Timeout exceeded while awaiting headers): " +
		"start the server (or let rlpipe start it with rl_options serve:) and check rl_options url"
	if err == nil || err.Error() != want || !errors.Is(err, openenv.ErrUnreachable) {
		t.Errorf("Open on a silent /schema: %v\nwant %s", err, want)
	}
}

// TestSharedSockets: stages whose options differ only in how they shape
// frames share the idle sockets of their server, so an idle socket of
// one does not hold a session another needs (max_concurrent_envs 1).
func TestSharedSockets(t *testing.T) {
	srv := fake(t, 1)
	first := open(t, &openenv.Options{URL: srv.URL})
	if _, err := first.Reset(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	first.End() // its socket is idle, its session open on the server
	second := open(t, &openenv.Options{URL: srv.URL, Observation: openenv.ObservationOptions{Field: "text"}})
	if obs, err := second.Reset(context.Background(), "b"); err != nil || obs != "ready" {
		t.Fatalf("the other stage's Reset: %q, %v; want ready on the idle socket", obs, err)
	}
}
