package openenv_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/envtest"
	"github.com/rlpipe/rlpipe/environments/openenv"
	"github.com/rlpipe/rlpipe/policy"
)

// solve answers the example's "A+B=" with the sum.
func solve(obs string) string {
	var a, b int
	if _, err := fmt.Sscanf(obs, "%d+%d=", &a, &b); err != nil {
		return "no idea"
	}
	return fmt.Sprint(a + b)
}

// TestRLEnvSuite runs the environments' suite against the shipped
// example served by rlpipe from the real openenv package.
func TestRLEnvSuite(t *testing.T) {
	opts, _ := exampleOptions(t)
	envtest.Run(t, envtest.Suite{Env: openenv.RLEnv, Options: opts, MaxSteps: 3,
		Prompt: tables.Prompt{PromptID: "arith"},
		Player: func() func(string) string { return solve }})
}

// TestEpisode plays the example through the runner: the right sum ends
// the episode with reward 1 and the step's metadata in the episode's
// info; a wrong answer gets the problem again, and a second one ends
// the episode.
func TestEpisode(t *testing.T) {
	opts, _ := exampleOptions(t)
	mk, _, err := openenv.RLEnv.Open(opts, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		player  func(string) string
		turns   int
		reward  float64
		lastObs string
	}{
		{"solved", solve, 1, 1, "correct"},
		{"two wrong answers", func(string) string { return "-1" }, 2, 0, "wrong"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env, err := mk(tables.Prompt{PromptID: "p"})
			if err != nil {
				t.Fatal(err)
			}
			r, err := environments.NewRunner(environments.Scripted(func(msgs []policy.Message) string {
				return c.player(msgs[len(msgs)-1].Content)
			}), &environments.RunnerOptions{MaxTurns: 5})
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Run(context.Background(), env, environments.Episode{ID: "arith-7"})
			if err != nil {
				t.Fatal(err)
			}
			tr := res.Trajectory
			if tr.Status != tables.StatusOK || res.Reward != c.reward {
				t.Fatalf("status %s, reward %v; want ok, %v", tr.Status, res.Reward, c.reward)
			}
			if got := res.Info["tries"]; got != float64(c.turns) {
				t.Errorf("info tries %v, want %d (the step's metadata)", got, c.turns)
			}
			if last := tr.Turns[len(tr.Turns)-1]; last.Content != c.lastObs {
				t.Errorf("last turn %+v, want the last observation %q", last, c.lastObs)
			}
			if tr.EnvOutcome == nil || !strings.Contains(*tr.EnvOutcome, fmt.Sprintf(`"reward":%v`, c.reward)) {
				t.Errorf("env_outcome %s, want reward %v", *tr.EnvOutcome, c.reward)
			}
		})
	}
}

// TestActions: how replies become actions, against the example's action
// schema ({"answer": string}, required, no other keys); an action the
// schema rejects is feedback for the policy, never an error.
func TestActions(t *testing.T) {
	base, _ := exampleOptions(t)
	const problem = "77+51=" // arith-1's (a wrong answer gets it again)
	const schema = `{"additionalProperties":false,"properties":{"metadata":{"additionalProperties":true,"description":"Additional metadata for the action","title":"Metadata","type":"object"},"answer":{"description":"The answer: a whole number","title":"Answer","type":"string"}},"required":["answer"],"title":"ArithAction","type":"object"}`
	for _, c := range []struct {
		name   string
		action openenv.ActionOptions
		reply  string
		want   string
		info   bool
	}{
		{"the one string field, by default", openenv.ActionOptions{}, "-1", problem, false},
		{"a named field", openenv.ActionOptions{Field: "answer"}, "200", problem, false},
		{"json", openenv.ActionOptions{JSON: true}, `{"answer": "-1"}`, problem, false},
		{"json in a fence", openenv.ActionOptions{JSON: true}, "```json\n{\"answer\": \"-1\"}\n```", problem, false},
		{"json and a field: text goes in the field", openenv.ActionOptions{JSON: true, Field: "answer"}, "-1", problem, false},
		{"json, not an object", openenv.ActionOptions{JSON: true}, "7",
			"invalid action: the reply is not a JSON object; reply with one JSON object that matches this JSON Schema: " + schema, true},
		{"json, wrong type", openenv.ActionOptions{JSON: true}, `{"answer": 7}`,
			"invalid action: at '/answer': got number, want string; the action's JSON Schema: " + schema, true},
		{"json, missing and extra keys", openenv.ActionOptions{JSON: true}, `{"guess": "7"}`,
			"invalid action: at '': additional properties 'guess' not allowed; at '': missing property 'answer'; the action's JSON Schema: " + schema, true},
		{"a field the schema lacks", openenv.ActionOptions{Field: "guess"}, "7",
			"invalid action: at '': additional properties 'guess' not allowed; at '': missing property 'answer'; the action's JSON Schema: " + schema, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := *base
			o.Action = c.action
			mk, _, err := openenv.RLEnv.Open(&o, "")
			if err != nil {
				t.Fatal(err)
			}
			env, _ := mk(tables.Prompt{})
			defer env.End()
			if _, err := env.Reset(context.Background(), "arith-1"); err != nil {
				t.Fatal(err)
			}
			st, err := env.Step(context.Background(), c.reply)
			if err != nil {
				t.Fatalf("Step: %v; want an observation", err)
			}
			if st.Observation != c.want || st.Done || st.Reward != 0 {
				t.Errorf("Step(%q): %+v\nwant observation %q", c.reply, st, c.want)
			}
			if _, ok := st.Info["openenv_invalid_action"]; ok != c.info {
				t.Errorf("info %v: openenv_invalid_action recorded %v, want %v", st.Info, ok, c.info)
			}
		})
	}
}

// TestOpen: options that name no server, or two, are refused at Open.
func TestOpen(t *testing.T) {
	const want = "openenv needs a server: set rl_options url: http://HOST:PORT (a running server) or serve: {app: module:app} (rlpipe starts it), one of them"
	for _, c := range []struct {
		name string
		opts any
		want string
	}{
		{"no options", nil, want},
		{"neither", &openenv.Options{}, want},
		{"both", &openenv.Options{URL: "http://127.0.0.1:1", Serve: &openenv.ServeOptions{App: "a:app"}}, want},
		{"a url without a host", &openenv.Options{URL: "localhost"}, `url "localhost": want http://HOST:PORT (or ws://HOST:PORT/ws)`},
		{"another scheme", &openenv.Options{URL: "ftp://h:1"}, `url "ftp://h:1": scheme "ftp": want http, https, ws or wss`},
		{"an app without its attribute", &openenv.Options{Serve: &openenv.ServeOptions{App: "server"}},
			`serve: app "server" is not module:attribute: set rl_options serve: {app: "package.module:app"}, the ASGI app create_app made`},
		{"a reset value JSON cannot hold", &openenv.Options{URL: "http://127.0.0.1:1", Reset: map[string]any{"difficulty": math.NaN()}},
			"openenv: rl_options cannot be written as JSON: json: unsupported value: NaN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := openenv.RLEnv.Open(c.opts, "")
			if err == nil || err.Error() != c.want {
				t.Errorf("Open: %v\nwant %s", err, c.want)
			}
		})
	}
	var _ = errors.Is
}

// TestVersion: the stage's cache key follows the served app's code (its
// package's .py files, or its module file) and request_timeout_s when
// set; a url: server's /schema. The app digests are sha256 over
// "PATH\x00LEN\x00CONTENT" per file, the schema's over the compacted
// document, checked with Python's hashlib.
func TestVersion(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pkg/__init__.py", "")
	write("pkg/server.py", "app = 1\n")
	write("pkg/sub/env.py", "REWARD = 1\n")
	write("mod.py", "app = 2\n")
	version := func(o *openenv.Options) string {
		t.Helper()
		_, v, err := openenv.RLEnv.Open(o, dir)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	serve := func(app string) *openenv.Options {
		return &openenv.Options{Serve: &openenv.ServeOptions{App: app, IdleStopS: -1}}
	}
	pkg := version(serve("pkg.server:app"))
	url := fake(t, 100).URL
	for _, c := range []struct {
		name string
		opts *openenv.Options
		want string
	}{
		{"a url", &openenv.Options{URL: url}, "schema=sha256:9ff013c5479c7e4b"},
		{"a url with request_timeout_s", &openenv.Options{URL: url, RequestTimeoutS: 30}, "request_timeout_s=30 schema=sha256:9ff013c5479c7e4b"},
		{"a package app", serve("pkg.server:app"), "app=sha256:3b5d205a074ce7fa"},
		{"a module app", serve("mod:app"), "app=sha256:d2884e653007262f"},
		{"an app found nowhere (installed in the venv)", serve("elsewhere.server:app"), ""},
		{"with request_timeout_s", &openenv.Options{Serve: &openenv.ServeOptions{App: "mod:app"}, RequestTimeoutS: 0.5}, "request_timeout_s=0.5 app=sha256:d2884e653007262f"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if v := version(c.opts); v != c.want {
				t.Errorf("version %q, want %q", v, c.want)
			}
		})
	}
	write("pkg/__pycache__/server.cpython-312.pyc", "bytecode")
	if v := version(serve("pkg.server:app")); v != pkg {
		t.Errorf("after a __pycache__ write: %q, want %q unchanged", v, pkg)
	}
	write("pkg/sub/env.py", "REWARD = 2\n")
	if v := version(serve("pkg.server:app")); v == pkg {
		t.Errorf("after editing pkg/sub/env.py: %q unchanged", v)
	}
}

// TestVersionFollowsSchema: a url: server whose /schema changes (another
// action) changes the version at the next Open, and its episodes
// validate against the new schema; whitespace alone changes nothing.
func TestVersionFollowsSchema(t *testing.T) {
	var doc atomic.Value
	doc.Store(`{"action": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"], "additionalProperties": false}}`)
	mux := http.NewServeMux()
	mux.HandleFunc("/schema", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(doc.Load().(string))) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	o := &openenv.Options{URL: srv.URL}
	cases := []struct{ name, doc, want string }{
		{"as served", "", "schema=sha256:9ff013c5479c7e4b"},
		{"whitespace only", `{"action":{"type":"object","properties":{"message":{"type":"string"}},"required":["message"],"additionalProperties":false}}`,
			"schema=sha256:9ff013c5479c7e4b"},
		{"another action", `{"action": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}`,
			"schema=sha256:7187196ca7514047"},
	}
	for _, c := range cases {
		if c.doc != "" {
			doc.Store(c.doc)
		}
		_, v, err := openenv.RLEnv.Open(o, "")
		if err != nil || v != c.want {
			t.Errorf("%s: version %q, %v; want %q", c.name, v, err, c.want)
		}
	}
	r, err := openenv.SharedRemote(o, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.ActionField(); got != "answer" {
		t.Errorf("the episodes' action field is %q, want answer (the schema read at the last Open)", got)
	}
}
