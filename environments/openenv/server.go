package openenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rlpipe/rlpipe/internal/loopback"
)

// DefaultStartTimeout bounds a server's start, until /health answers:
// openenv.core imports gradio, 10–16 s on a loaded machine.
const DefaultStartTimeout = 120 * time.Second

// ServeOptions start an OpenEnv app: `PYTHON -m uvicorn APP --host
// 127.0.0.1 --port PORT` in Cwd, PORT a free loopback port.
type ServeOptions struct {
	// App is uvicorn's "module:attribute" ("arith_env.server:app").
	App string `json:"app"`
	// Python is an interpreter or a venv directory (default: python3 on
	// PATH). Relative paths are taken from the pipeline file's directory.
	Python string `json:"python,omitempty"`
	// Cwd is the server's working directory (default: the pipeline file's
	// directory); it heads PYTHONPATH, before PythonPath.
	Cwd        string   `json:"cwd,omitempty"`
	PythonPath []string `json:"pythonpath,omitempty"`
	// Env is added to the server's environment.
	Env map[string]string `json:"env,omitempty"`
	// StartTimeoutS bounds a start (0: DefaultStartTimeout).
	StartTimeoutS float64 `json:"start_timeout_s,omitempty"`
	// IdleStopS stops the server when no episode has used it for this
	// long (0: 300 s; negative: as soon as the last episode ends). The
	// next episode starts it again.
	IdleStopS float64 `json:"idle_stop_s,omitempty"`
}

// Server is an OpenEnv app's uvicorn process that rlpipe supervises: it
// starts on first use, is health-checked (GET /health), restarts when it
// has died, and its process group is killed by Close.
type Server struct {
	o      ServeOptions
	python string
	dir    string

	mu       sync.Mutex
	proc     *process
	lastErr  string // how the previous process ended, for messages
	startErr error  // a failed start: every later Base returns it
	starts   int
}

// process is one run of the server.
type process struct {
	cmd    *exec.Cmd
	base   string
	tail   *tail
	exited chan struct{}
	err    error // Wait's, once exited is closed
}

// NewServer prepares a server for o; dir is what relative paths are
// taken from. Nothing starts until Base.
func NewServer(o ServeOptions, dir string) (*Server, error) {
	if o.App == "" || !strings.Contains(o.App, ":") {
		return nil, fmt.Errorf("serve: app %q is not module:attribute: set rl_options serve: {app: \"package.module:app\"}, the ASGI app create_app made", o.App)
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	s := &Server{o: o, dir: abs(o.Cwd)}
	if s.dir == "" {
		s.dir = dir
	}
	switch {
	case o.Python == "":
		s.python = "python3"
	case strings.ContainsRune(o.Python, '/'):
		s.python = abs(o.Python)
		if fi, err := os.Stat(s.python); err == nil && fi.IsDir() {
			s.python = filepath.Join(s.python, "bin", "python")
		}
	default:
		s.python = o.Python
	}
	return s, nil
}

// Starts is how many times the process was started.
func (s *Server) Starts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts
}

// Base returns the running server's http://127.0.0.1:PORT, starting it
// (again, when it died) and waiting for /health. A start that fails
// (the app does not import, /health does not answer in time) is not
// tried again: every later Base returns its error.
func (s *Server) Base(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.startErr != nil {
		return "", s.startErr
	}
	if p := s.proc; p != nil {
		select {
		case <-p.exited:
			s.lastErr = fmt.Sprintf("the server exited (%v); its stderr ends: %s", p.err, p.tail.String())
			s.proc = nil
		default:
			return p.base, nil
		}
	}
	p, err := s.start(ctx)
	if err != nil {
		if errors.Is(err, ErrStart) {
			s.startErr = err
		}
		return "", err
	}
	s.proc = p
	return p.base, nil
}

// Explain adds how the server's process ended to msg, when it has (a
// socket that failed as the server died: the exit is waited for, up to 2
// s).
func (s *Server) Explain(msg string) string {
	s.mu.Lock()
	p, last := s.proc, s.lastErr
	s.mu.Unlock()
	if p != nil {
		select {
		case <-p.exited:
			return fmt.Sprintf("%s: the server exited (%v); its stderr ends: %s; rlpipe restarts it for the next episode", msg, p.err, p.tail.String())
		case <-time.After(2 * time.Second):
			return msg
		}
	}
	if last != "" {
		return msg + ": " + last + "; rlpipe restarted it"
	}
	return msg
}

// start runs the process and waits for /health.
func (s *Server) start(ctx context.Context) (*process, error) {
	port, err := loopback.FreePort()
	if err != nil {
		return nil, &Error{ErrStart, fmt.Sprintf("serve %s: pick a loopback port: %v", s.o.App, err)}
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(s.python, "-m", "uvicorn", s.o.App, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--log-level", "warning")
	cmd.Dir = s.dir
	pp := append([]string{s.dir}, s.o.PythonPath...)
	for i, p := range pp {
		if !filepath.IsAbs(p) {
			pp[i] = filepath.Join(s.dir, p)
		}
	}
	if old := os.Getenv("PYTHONPATH"); old != "" {
		pp = append(pp, old)
	}
	cmd.Env = append(os.Environ(), "PYTHONPATH="+strings.Join(pp, string(os.PathListSeparator)), "PYTHONUNBUFFERED=1")
	for k, v := range s.o.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	t := &tail{max: 2048}
	cmd.Stdout, cmd.Stderr = t, t
	// Its own process group, killed whole by Close; and killed with
	// rlpipe should rlpipe die first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, &Error{ErrStart, fmt.Sprintf("serve %s: start %s: %v: set rl_options serve: {python: ...} to a Python (or venv) with openenv and uvicorn (scripts/openenv-venv.sh makes .venv-openenv)", s.o.App, s.python, err)}
	}
	s.starts++
	p := &process{cmd: cmd, base: base, tail: t, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	timeout := DefaultStartTimeout
	if s.o.StartTimeoutS > 0 {
		timeout = time.Duration(s.o.StartTimeoutS * float64(time.Second))
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	err = loopback.WaitHealthy(hctx, base+"/health", p.exited)
	cancel()
	if err != nil {
		p.kill()
		var msg string
		switch {
		case errors.Is(err, loopback.ErrExited):
			msg = fmt.Sprintf("serve %s: the server exited before /health answered (%v); its stderr ends: %s", s.o.App, p.err, p.tail.String())
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			msg = fmt.Sprintf("serve %s: %s/health did not answer within %v; its stderr ends: %s: raise rl_options serve: {start_timeout_s: ...} or fix the app", s.o.App, base, timeout, p.tail.String())
		default:
			return nil, err
		}
		return nil, &Error{ErrStart, msg}
	}
	return p, nil
}

// kill kills the process group and waits for the process.
func (p *process) kill() {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-p.exited
}

// Close stops the server: its whole process group is killed.
func (s *Server) Close() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}

// String is the tail's last lines, on one line, "(nothing)" when empty.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.b)), "\n")
	if len(lines) > 6 {
		lines = lines[len(lines)-6:]
	}
	s := strings.TrimSpace(strings.Join(lines, " | "))
	if s == "" {
		return "(nothing)"
	}
	return s
}
