package skyrlgym

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/sandbox"
	"github.com/rlpipe/rlpipe/sandbox/pyinterp"
)

//go:embed worker.py
var workerScript []byte

// In the sandbox: the worker script, the directories of environment
// classes given as files, and env_config's db_path.
const (
	workerPath = "/rlpipe-skyrl/worker.py"
	classesDir = "/rlpipe-skyrl-classes"
	dataDir    = "/rlpipe-skyrl-data/db"
)

// startTimeout bounds a worker's start: importing skyrl_gym (pandas)
// takes 1–3 s on a loaded machine.
const startTimeout = 2 * time.Minute

// setup is what a worker process is started from; workers with equal
// setups are one shared process (the pool's key).
type setup struct {
	python  string // as the python option says it ("" for the default)
	sandbox bool
	paths   string        // host directories of class files, "\n"-joined, in order
	data    string        // host db_path mounted at dataDir (sandbox only)
	wall    time.Duration // per request
	memory  int64         // bytes (sandbox only)
}

// Worker is one supervised skyrl_gym worker process shared by every
// episode of its setup, restarted when it ends. Episodes are multiplexed
// by handle; each request carries an id its reply repeats.
type Worker struct {
	s      setup
	ids    atomic.Int64 // request ids; 0 is a start's hello
	envs   atomic.Int64 // environment handles
	mu     sync.Mutex   // cur, gen, starts
	cur    conn
	gen    int // generation of cur: 1, 2, … (0 before the first start)
	starts int
	ver    string // skyrl-gym's version, once started
}

// pool holds the program's workers by setup: every stage and episode of
// the same setup shares one process.
var pool = struct {
	mu sync.Mutex
	m  map[setup]*Worker
}{m: map[setup]*Worker{}}

func workerFor(s setup) *Worker {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	w := pool.m[s]
	if w == nil {
		w = &Worker{s: s}
		pool.m[s] = w
	}
	return w
}

// Starts is how many processes the worker has started: 1, plus one per
// restart after a process that ended.
func (w *Worker) Starts() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.starts
}

// acquire returns the running process and its generation, starting one
// when there is none or the last one ended.
func (w *Worker) acquire(ctx context.Context) (conn, int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur != nil && w.cur.alive() {
		return w.cur, w.gen, nil
	}
	c, ver, err := w.start(ctx)
	if err != nil {
		return nil, 0, err
	}
	w.cur, w.ver = c, ver
	w.gen++
	w.starts++
	return c, w.gen, nil
}

// current is the process of generation gen when it still runs, else nil.
func (w *Worker) current(gen int) conn {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gen != gen || w.cur == nil || !w.cur.alive() {
		return nil
	}
	return w.cur
}

// start starts a process and waits for its hello.
func (w *Worker) start(ctx context.Context) (conn, string, error) {
	fail := func(format string, args ...any) (conn, string, error) {
		return nil, "", fmt.Errorf("start the skyrl_gym worker (python %s): %s: %w", w.pythonName(), fmt.Sprintf(format, args...), ErrStart)
	}
	var c conn
	if w.s.sandbox {
		in, err := pyinterp.Find(ctx, w.s.python)
		if err != nil {
			return fail("%v", err)
		}
		spec := sandbox.Spec{
			Command:        []string{in.Command, "-I", workerPath},
			ReadOnlyFiles:  map[string][]byte{workerPath: workerScript},
			ReadOnlyBinds:  in.Binds,
			ReadOnlyMounts: maps.Clone(in.Mounts),
			Limits:         sandbox.Limits{Wall: max(w.s.wall, startTimeout), CPUTime: 24 * time.Hour, MemoryBytes: w.s.memory},
		}
		if spec.ReadOnlyMounts == nil {
			spec.ReadOnlyMounts = map[string]string{}
		}
		for i, dir := range w.paths() {
			spec.ReadOnlyMounts[fmt.Sprintf("%s/%d", classesDir, i)] = dir
		}
		if w.s.data != "" {
			spec.ReadOnlyMounts[dataDir] = w.s.data
		}
		p, err := sandbox.Start(context.Background(), spec)
		if err != nil {
			return fail("%v", err)
		}
		c = newSandboxConn(p)
	} else {
		host, err := pyinterp.Host(w.s.python)
		if err != nil {
			return fail("%v", err)
		}
		pc, err := startPipe(host, os.Environ())
		if err != nil {
			return fail("%v", err)
		}
		c = pc
	}
	line, err := c.call(ctx, 0, []byte(`{"id":0,"op":"hello"}`), startTimeout)
	if err != nil {
		c.kill()
		if strings.Contains(err.Error(), "No module named") {
			return fail("%v; set python: to a venv with skyrl-gym (the project's .venv-py has it)", err)
		}
		return fail("%v", err)
	}
	var r struct {
		OK      bool   `json:"ok"`
		Version string `json:"version"`
		Error   string `json:"error"`
	}
	if err := json.Unmarshal(line, &r); err != nil || !r.OK {
		c.kill()
		return fail("its hello was %s", quote(line))
	}
	return c, r.Version, nil
}

func (w *Worker) pythonName() string {
	if w.s.python == "" {
		return "from $" + pyinterp.EnvPython + " or PATH"
	}
	return w.s.python
}

// paths are the directories of class files, as the host sees them.
func (w *Worker) paths() []string {
	if w.s.paths == "" {
		return nil
	}
	return strings.Split(w.s.paths, "\n")
}

// workerPaths are those directories as the worker sees them.
func (w *Worker) workerPaths() []string {
	ps := w.paths()
	if !w.s.sandbox {
		return ps
	}
	out := make([]string, len(ps))
	for i := range ps {
		out[i] = fmt.Sprintf("%s/%d", classesDir, i)
	}
	return out
}

// reply is a worker's answer.
type reply struct {
	OK           bool           `json:"ok"`
	Error        string         `json:"error"`
	Kind         string         `json:"kind"`
	Version      string         `json:"version"`
	Registered   []string       `json:"registered"`
	Observations []message      `json:"observations"`
	Reward       *float64       `json:"reward"`
	Done         bool           `json:"done"`
	Metadata     map[string]any `json:"metadata"`
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// send sends req on c (its id set here) and decodes the reply. The error
// is ctx's or a *lostError (see conn.call); a reply with ok false is
// returned as it is.
func (w *Worker) send(ctx context.Context, c conn, req map[string]any) (reply, error) {
	id := w.ids.Add(1)
	req["id"] = id
	b, err := json.Marshal(req)
	if err != nil {
		return reply{}, fmt.Errorf("encode a request to the skyrl_gym worker: %w", err)
	}
	line, err := c.call(ctx, id, b, w.s.wall)
	if err != nil {
		return reply{}, err
	}
	var r reply
	if err := json.Unmarshal(line, &r); err != nil {
		c.kill()
		return reply{}, &lostError{culprit: true, reason: fmt.Sprintf("the process wrote %s on the protocol stream, not a reply: %v", quote(line), err)}
	}
	return r, nil
}

// post sends req on c (its id set here) without waiting for the reply
// (see conn.post).
func (w *Worker) post(c conn, req map[string]any) {
	id := w.ids.Add(1)
	req["id"] = id
	b, err := json.Marshal(req)
	if err != nil {
		return // a close's fields are strings: it always encodes
	}
	c.post(id, b, w.s.wall)
}

// check asks the worker whether class is an environment it can make, and
// returns skyrl-gym's version.
func (w *Worker) check(ctx context.Context, class string) (string, error) {
	c, _, err := w.acquire(ctx)
	if err != nil {
		return "", err
	}
	r, err := w.send(ctx, c, map[string]any{"op": "check", "class": class, "paths": w.workerPaths()})
	if err != nil {
		return "", fmt.Errorf("check env_class %s in the skyrl_gym worker: %v: %w", class, err, environments.ErrInfra)
	}
	if !r.OK {
		return "", r.refusal(class)
	}
	return w.version(), nil
}

func (w *Worker) version() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ver
}

// refusal is the error of a check that failed.
func (r reply) refusal(class string) error {
	if r.Kind != "unknown_class" {
		return fmt.Errorf("env_class %s: %s: %w", class, r.Error, ErrUnknownClass)
	}
	if strings.Contains(class, ":") {
		return fmt.Errorf("env_class %s: %s; a class of your own is module:Class (importable by the python) or path/to/file.py:Class (relative to the pipeline file): %w",
			class, r.Error, ErrUnknownClass)
	}
	return fmt.Errorf("env_class %s: skyrl_gym registers no such env (it has %s); a class of your own is module:Class or path/to/file.py:Class: %w",
		class, strings.Join(r.Registered, ", "), ErrUnknownClass)
}
