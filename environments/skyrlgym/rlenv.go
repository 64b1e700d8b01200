package skyrlgym

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
)

// Options are a skyrl_gym environment's rl_options in an episodes stage:
//
//	generate:
//	  kind: episodes
//	  rl_env: skyrl_gym
//	  rl_options: {env_class: gsm8k_multi_turn, python: ../../.venv-py}
type Options struct {
	// EnvClass is a registered skyrl_gym env id (gsm8k, gsm8k_multi_turn,
	// text2sql, search, searchcode, aime, lcb), or a class of your own:
	// module:Class (importable by the python) or path/to/file.py:Class
	// (relative to the pipeline file). Required.
	EnvClass string `json:"env_class"`
	// EnvConfig is the env's env_config, given to it as an omegaconf
	// DictConfig (text2sql reads db_path, search search_url, …). A
	// relative db_path is taken from the pipeline file's directory.
	EnvConfig map[string]any `json:"env_config,omitempty"`
	// Python is a venv directory or an interpreter with skyrl-gym
	// installed, relative to the pipeline file's directory (as a
	// verifier's python:); "" means $RLPIPE_PYTHON, else python3 on PATH
	// (sandbox/pyinterp's rule).
	Python string `json:"python,omitempty"`
	// Sandbox runs the worker in rlpipe's sandbox (no network, a
	// read-only root, limits). Unset: true for the env classes that run
	// the model's code (lcb, searchcode), false for the others.
	Sandbox *bool `json:"sandbox,omitempty"`
	// RequestTimeoutS bounds the worker's answer to each request (a make,
	// an init, a step), in seconds: past it the worker is killed and
	// restarted (0: DefaultRequestTimeout).
	RequestTimeoutS float64 `json:"request_timeout_s,omitempty"`
	// MemoryMB bounds the sandboxed worker's memory (0: 4096).
	MemoryMB int `json:"memory_mb,omitempty"`
}

// DefaultRequestTimeout bounds a request where RequestTimeoutS is not set.
const DefaultRequestTimeout = 5 * time.Minute

// codeRunners are the registered env classes that execute the model's
// code: they run sandboxed unless the sandbox option says otherwise.
var codeRunners = map[string]bool{"lcb": true, "searchcode": true}

// Errors of Open, the Maker and the environments, tested with errors.Is.
var (
	// ErrOptions: rl_options that cannot make a skyrl_gym environment.
	ErrOptions = errors.New("bad skyrl_gym options")
	// ErrUnknownClass wraps ErrOptions: env_class names no env skyrl_gym
	// registers and no class that imports.
	ErrUnknownClass = fmt.Errorf("unknown skyrl_gym env class: %w", ErrOptions)
	// ErrStart wraps environments.ErrInfra: the worker process did not
	// start (no such python, skyrl_gym not installed, no sandbox).
	ErrStart = fmt.Errorf("the skyrl_gym worker did not start: %w", environments.ErrInfra)
	// ErrRow: a prompt row that cannot make an environment (metadata
	// that is not a JSON object, an extra the env requires missing).
	ErrRow = errors.New("prompt row does not make a skyrl_gym env")
	// ErrRaised: the environment raised during an episode's init or step
	// (*EnvError). The episode is env_error.
	ErrRaised = errors.New("skyrl_gym env raised")
	// ErrNonFinite: a step's reward is NaN or infinite (env_error).
	ErrNonFinite = errors.New("skyrl_gym env returned a non-finite reward")
	// ErrCrashed: the worker ended, or broke the protocol, while serving
	// this episode's request (env_error: the episode may have caused it).
	// The worker restarts for the next request.
	ErrCrashed = errors.New("the skyrl_gym worker ended during this episode's request; it restarts for the next one")
	// ErrLost wraps environments.ErrInfra: the episode's environment was
	// in a worker that ended because of another episode (infra_error).
	ErrLost = fmt.Errorf("the episode's skyrl_gym env was lost with its worker: %w", environments.ErrInfra)
)

// EnvError is an exception the environment raised.
type EnvError struct {
	// Class is the env class, Prompt the prompt row's id, Op the request
	// ("make", "init", "step").
	Class, Prompt, Op string
	// Reason is the exception's last traceback line, e.g.
	// "KeyError: 'extra_info'".
	Reason string
}

func (e *EnvError) Error() string {
	msg := fmt.Sprintf("skyrl_gym env %s for prompt %s: %s raised %s", e.Class, e.Prompt, e.Op, e.Reason)
	if strings.HasPrefix(e.Reason, "KeyError") || strings.HasPrefix(e.Reason, "AssertionError") {
		msg += "; the env reads a key the row lacks: put it in the row's metadata (reward_spec, extra_info, max_turns, db_id, data, …; docs/ROLLOUTS.md, \"SkyRL-gym\")"
	}
	return msg
}

// Unwrap gives ErrRaised, and ErrRow for a make: the row does not make
// an env.
func (e *EnvError) Unwrap() []error {
	if e.Op == "make" {
		return []error{ErrRaised, ErrRow}
	}
	return []error{ErrRaised}
}

// RLEnv is skyrl_gym as an episodes stage's rl_env: SkyRL-gym's text
// environments, played in a supervised Python worker (see the package
// doc).
var RLEnv = environments.Typed("skyrl_gym", openRLEnv)

// openRLEnv checks the options, starts (or finds) the worker of their setup
// and asks it whether env_class is an env it can make. The version is
// skyrl-gym's version, with the class file's digest for a file class.
func openRLEnv(o *Options, dir string) (environments.Maker, string, error) {
	r, err := resolve(o, dir)
	if err != nil {
		return nil, "", err
	}
	w := workerFor(r.setup)
	ver, err := w.check(context.Background(), r.class)
	if err != nil {
		return nil, "", err
	}
	version := "skyrl-gym-" + ver
	if r.digest != "" {
		version += "+" + r.digest
	}
	m := &maker{w: w, class: r.class, config: r.config}
	return m.make, version, nil
}

// resolved is what options say once checked: the worker's setup, the
// class as the worker names it, the env_config it gets and the class
// file's digest ("" for none).
type resolved struct {
	setup         setup
	class, digest string
	config        map[string]any
}

// resolve checks o and works out what it says, relative paths from dir.
func resolve(o *Options, dir string) (resolved, error) {
	var r resolved
	if o == nil || o.EnvClass == "" {
		return r, fmt.Errorf("env_class is missing: add rl_options: {env_class: gsm8k} (a registered skyrl_gym env, or module:Class or path/to/file.py:Class of your own): %w", ErrOptions)
	}
	if o.RequestTimeoutS < 0 || math.IsNaN(o.RequestTimeoutS) || math.IsInf(o.RequestTimeoutS, 0) {
		return r, fmt.Errorf("request_timeout_s is %v: want seconds above 0, or leave it out for %s: %w", o.RequestTimeoutS, DefaultRequestTimeout, ErrOptions)
	}
	if o.MemoryMB < 0 {
		return r, fmt.Errorf("memory_mb is %d: want MiB above 0, or leave it out for 4096: %w", o.MemoryMB, ErrOptions)
	}
	s := setup{python: o.Python, wall: DefaultRequestTimeout, memory: 4096 << 20}
	if s.python != "" && !filepath.IsAbs(s.python) {
		s.python = filepath.Join(dir, s.python)
	}
	if o.RequestTimeoutS > 0 {
		s.wall = time.Duration(o.RequestTimeoutS * float64(time.Second))
	}
	if o.MemoryMB > 0 {
		s.memory = int64(o.MemoryMB) << 20
	}
	s.sandbox = codeRunners[o.EnvClass]
	if o.Sandbox != nil {
		s.sandbox = *o.Sandbox
	}
	class, digest, err := classRef(o.EnvClass, dir, &s)
	if err != nil {
		return r, err
	}
	config := o.EnvConfig
	if db, ok := config["db_path"]; ok {
		p, ok := db.(string)
		if !ok || p == "" {
			return r, fmt.Errorf("env_config.db_path is %v: want a directory (relative to the pipeline file): %w", db, ErrOptions)
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		config = maps.Clone(config)
		config["db_path"] = p
		if s.sandbox {
			s.data, config["db_path"] = p, dataDir
		}
	}
	return resolved{setup: s, class: class, digest: digest, config: config}, nil
}

// classRef resolves env_class: a file class's directory joins the
// setup's paths, and the class becomes module:Class; digest is the
// file's (it enters the version).
func classRef(ref, dir string, s *setup) (class, digest string, err error) {
	target, name, ok := strings.Cut(ref, ":")
	if !ok {
		return ref, "", nil
	}
	if target == "" || name == "" || strings.Contains(name, ":") {
		return "", "", fmt.Errorf("env_class %q: want a registered env id, module:Class or path/to/file.py:Class: %w", ref, ErrOptions)
	}
	if !strings.HasSuffix(target, ".py") {
		return ref, "", nil
	}
	host := target
	if !filepath.IsAbs(host) {
		host = filepath.Join(dir, host)
	}
	b, err := os.ReadFile(host)
	if err != nil {
		return "", "", fmt.Errorf("env_class %s: read the class file (relative paths are taken from the pipeline file's directory): %v: %w", ref, err, ErrOptions)
	}
	abs, err := filepath.Abs(filepath.Dir(host))
	if err != nil {
		return "", "", fmt.Errorf("env_class %s: %v: %w", ref, err, ErrOptions)
	}
	s.paths = abs
	sum := sha256.Sum256(b)
	return strings.TrimSuffix(filepath.Base(host), ".py") + ":" + name, hex.EncodeToString(sum[:6]), nil
}

// maker makes an environment per episode: the env object is made in the
// worker at once, so a row the env refuses fails before any episode.
type maker struct {
	w      *Worker
	class  string
	config map[string]any
}

func (m *maker) make(p tables.Prompt) (environments.Env, error) {
	extras, err := Extras(p)
	if err != nil {
		return nil, err
	}
	e := &env{m: m, prompt: p, handle: fmt.Sprintf("e%d", m.w.envs.Add(1)), extras: extras}
	ctx := context.Background()
	var r reply
	var gen int
	// A process that ended under another episode's request is started
	// again: one more try. One that ended while serving this make was
	// ended by the row's env: the row is to blame, and no retry.
	var lost *lostError
	for try := 0; ; try++ {
		var c conn
		c, gen, err = m.w.acquire(ctx)
		if err != nil {
			return nil, err
		}
		r, err = m.w.send(ctx, c, e.makeRequest())
		if err == nil || !errors.As(err, &lost) || lost.culprit || try == 1 {
			break
		}
	}
	if lost != nil && lost.culprit {
		return nil, fmt.Errorf("skyrl_gym env %s for prompt %s: make: %s; the worker ended while making this row's env (it restarts for the next request): %w",
			m.class, p.PromptID, lost.reason, ErrRow)
	}
	if err != nil {
		return nil, fmt.Errorf("skyrl_gym env %s for prompt %s: make: %v: %w", m.class, p.PromptID, err, environments.ErrInfra)
	}
	if !r.OK {
		return nil, &EnvError{Class: m.class, Prompt: p.PromptID, Op: "make", Reason: r.Error}
	}
	e.gen = gen
	return e, nil
}

// Extras is the extras a prompt row gives its environment: the row's
// metadata object (a SkyRL dataset's extra columns: reward_spec,
// extra_info, max_turns, db_id, data, …), and, when it has no
// reward_spec and the row has an answer, reward_spec {method: rule,
// ground_truth: the answer}.
func Extras(p tables.Prompt) (map[string]any, error) {
	extras := map[string]any{}
	if strings.TrimSpace(p.Metadata) != "" {
		if err := json.Unmarshal([]byte(p.Metadata), &extras); err != nil || extras == nil {
			return nil, fmt.Errorf("prompt %s: its metadata is not a JSON object (%v); a skyrl_gym env takes its extras from it: %w", p.PromptID, err, ErrRow)
		}
	}
	if _, ok := extras["reward_spec"]; !ok && p.Answer != "" {
		extras["reward_spec"] = map[string]any{"method": "rule", "ground_truth": p.Answer}
	}
	return extras, nil
}

// Prompt is the chat a prompt row starts an episode with: its messages,
// or its prompt as one user message.
func Prompt(p tables.Prompt) []message {
	if len(p.Messages) > 0 {
		out := make([]message, len(p.Messages))
		for i, m := range p.Messages {
			out[i] = message{Role: m.Role, Content: m.Content}
		}
		return out
	}
	return []message{{Role: "user", Content: p.Prompt}}
}

// Observation is the text of SkyRL observation messages: their contents
// in order, joined by a blank line; roles are dropped (the runner shows
// every observation in its observation role).
func Observation(msgs []message) string {
	parts := make([]string, len(msgs))
	for i, m := range msgs {
		parts[i] = m.Content
	}
	return strings.Join(parts, "\n\n")
}

// env is one episode's environment, an env object in the worker by
// handle. gen is the worker generation that holds it (0: none).
type env struct {
	m      *maker
	prompt tables.Prompt
	handle string
	extras map[string]any
	gen    int
	live   bool // initialised, not yet done or closed
}

func (e *env) makeRequest() map[string]any {
	return map[string]any{"op": "make", "env": e.handle, "class": e.m.class, "config": e.m.config,
		"extras": e.extras, "paths": e.m.w.workerPaths()}
}

// Reset inits the env with the prompt row's chat. The env is made again
// first when its worker restarted since it was made (or it was played
// before).
func (e *env) Reset(ctx context.Context, id string) (string, error) {
	if e.live {
		e.close()
	}
	c, gen, err := e.m.w.acquire(ctx)
	if err != nil {
		return "", err
	}
	req := map[string]any{"op": "init", "env": e.handle, "prompt": Prompt(e.prompt)}
	if gen != e.gen {
		req["make"] = e.makeRequest()
	}
	r, err := e.call(ctx, c, "init", req)
	if err != nil {
		// The env may be in the process still (made, then its init
		// raised; or the request dropped from the queue, made later):
		// End closes it there, its close written after the init.
		e.gen = gen
		return "", err
	}
	e.gen, e.live = gen, true
	return Observation(r.Observations), nil
}

// Step sends the policy's reply to the env.
func (e *env) Step(ctx context.Context, action string) (environments.Step, error) {
	if !e.live {
		return environments.Step{}, fmt.Errorf("skyrl_gym env %s for prompt %s: step before reset, or after the episode ended", e.m.class, e.prompt.PromptID)
	}
	c := e.m.w.current(e.gen)
	if c == nil {
		e.live = false
		return environments.Step{}, fmt.Errorf("skyrl_gym env %s for prompt %s: step: its worker ended since the episode began: %w",
			e.m.class, e.prompt.PromptID, ErrLost)
	}
	r, err := e.call(ctx, c, "step", map[string]any{"op": "step", "env": e.handle, "action": action})
	if err != nil {
		e.live = false
		return environments.Step{}, err
	}
	if r.Reward == nil {
		e.live = false
		return environments.Step{}, fmt.Errorf("skyrl_gym env %s for prompt %s: step: the worker's reply has no reward: %w", e.m.class, e.prompt.PromptID, ErrRaised)
	}
	st := environments.Step{Observation: Observation(r.Observations), Reward: *r.Reward, Done: r.Done}
	if len(r.Metadata) > 0 {
		st.Info = r.Metadata
	}
	if r.Done {
		e.live, e.gen = false, 0 // the worker closed it
	}
	return st, nil
}

// call sends one of the episode's requests and turns what went wrong
// into the episode's error.
func (e *env) call(ctx context.Context, c conn, op string, req map[string]any) (reply, error) {
	r, err := e.m.w.send(ctx, c, req)
	var lost *lostError
	switch {
	case err == nil && r.OK:
		return r, nil
	case err == nil && r.Kind == "nonfinite":
		return r, fmt.Errorf("skyrl_gym env %s for prompt %s: %s: %s: %w", e.m.class, e.prompt.PromptID, op, r.Error, ErrNonFinite)
	case err == nil:
		return r, &EnvError{Class: e.m.class, Prompt: e.prompt.PromptID, Op: op, Reason: r.Error}
	case errors.As(err, &lost) && lost.culprit:
		return r, fmt.Errorf("skyrl_gym env %s for prompt %s: %s: %s: %w", e.m.class, e.prompt.PromptID, op, lost.reason, ErrCrashed)
	case errors.As(err, &lost):
		return r, fmt.Errorf("skyrl_gym env %s for prompt %s: %s: during another episode's request, %s: %w",
			e.m.class, e.prompt.PromptID, op, lost.reason, ErrLost)
	}
	return r, fmt.Errorf("skyrl_gym env %s for prompt %s: %s: %w", e.m.class, e.prompt.PromptID, op, err)
}

// End closes the env in the worker, if it is still there, without
// waiting: the close is sent at once to an idle worker, else ahead of
// its next request, never behind another episode's request.
func (e *env) End() error {
	e.close()
	return nil
}

func (e *env) close() {
	gen := e.gen
	e.gen, e.live = 0, false
	if gen == 0 {
		return
	}
	c := e.m.w.current(gen)
	if c == nil {
		return // gone with its worker
	}
	e.m.w.post(c, map[string]any{"op": "close", "env": e.handle})
}
