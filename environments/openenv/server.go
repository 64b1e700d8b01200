package openenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rlpipe/rlpipe/internal/bounded"
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

	// freePort picks the port of a start (loopback.FreePort; a test
	// hands out a taken one).
	freePort func() (int, error)

	mu       sync.Mutex
	proc     *process
	prev     *process   // the process before proc, for messages
	starting *startCall // the start under way, nil when none
	gen      int        // Close's count: a start that outlives a Close is killed
	lastErr  string     // how the previous process ended, for messages
	startErr error      // a failed start: every later Base returns it
	starts   int
}

// startCall is one start that every episode needing the server waits
// for, each with its own ctx.
type startCall struct {
	done chan struct{}
	p    *process
	err  error
}

// process is one run of the server.
type process struct {
	cmd    *exec.Cmd
	base   string
	tail   *tail
	exited chan struct{}
	err    error     // Wait's, once exited is closed
	at     time.Time // when Wait returned, once exited is closed
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
	s := &Server{o: o, dir: abs(o.Cwd), freePort: loopback.FreePort}
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
//
// The start is not the caller's: it runs under ctx's values without its
// cancellation, bounded by the start timeout, so an episode whose stage
// timeout is shorter than the start does not kill it for the next one.
// Every caller waits for the one start under way with its own ctx.
func (s *Server) Base(ctx context.Context) (string, error) {
	s.mu.Lock()
	if s.startErr != nil {
		s.mu.Unlock()
		return "", s.startErr
	}
	if p := s.proc; p != nil {
		select {
		case <-p.exited:
			s.lastErr = fmt.Sprintf("the server exited (%v); its stderr ends: %s", p.err, p.tail.String())
			s.prev, s.proc = p, nil
		default:
			s.mu.Unlock()
			return p.base, nil
		}
	}
	call := s.starting
	if call == nil {
		call = &startCall{done: make(chan struct{})}
		s.starting = call
		go s.run(context.WithoutCancel(ctx), call, s.gen)
	}
	s.mu.Unlock()
	select {
	case <-call.done:
		if call.err != nil {
			return "", call.err
		}
		return call.p.base, nil
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

// maxPortTries bounds the starts on a new port when the previous one
// lost its port to another process ("address already in use").
const maxPortTries = 3

// run starts the server for call (on a new port while the port is lost
// to another process), then publishes the process or the error.
func (s *Server) run(ctx context.Context, call *startCall, gen int) {
	var p *process
	var err error
	for try := 1; ; try++ {
		var inUse bool
		p, inUse, err = s.start(ctx)
		if !inUse || try == maxPortTries {
			break
		}
	}
	s.mu.Lock()
	s.starting = nil
	switch {
	case err != nil:
		if errors.Is(err, ErrStart) {
			s.startErr = err
		}
	case s.gen != gen: // closed while it started
		err = &Error{ErrUnreachable, fmt.Sprintf("serve %s: the server was stopped (its stage closed) while it started: the next episode starts it again", s.o.App)}
	default:
		s.proc = p
	}
	s.mu.Unlock()
	if err != nil && p != nil {
		p.kill()
		p = nil
	}
	call.p, call.err = p, err
	close(call.done)
}

// Explain adds how the process serving base ended to msg, when it has
// (a socket that failed as the server died: the exit is waited for, up
// to 2 s). sent is when the failed request was sent (zero for a reset):
// blamed is true when the process exited after it, during that step.
func (s *Server) Explain(msg, base string, sent time.Time) (_ string, blamed bool) {
	s.mu.Lock()
	var p *process
	for _, q := range []*process{s.proc, s.prev} {
		if q != nil && q.base == base {
			p = q
			break
		}
	}
	s.mu.Unlock()
	if p == nil {
		return msg, false
	}
	select {
	case <-p.exited:
	case <-time.After(2 * time.Second):
		return msg, false
	}
	if !sent.IsZero() && sent.Before(p.at) {
		return fmt.Sprintf("%s: the server exited (%v) during this step; its stderr ends: %s: the environment crashed on this action (rlpipe restarts it for the next episode)", msg, p.err, p.tail.String()), true
	}
	return fmt.Sprintf("%s: the server exited (%v); its stderr ends: %s; rlpipe restarts it for the next episode", msg, p.err, p.tail.String()), false
}

// start runs the process and waits for /health; inUse reports a
// process that exited because another process took its port.
func (s *Server) start(ctx context.Context) (_ *process, inUse bool, _ error) {
	port, err := s.freePort()
	if err != nil {
		return nil, false, &Error{ErrStart, fmt.Sprintf("serve %s: pick a loopback port: %v", s.o.App, err)}
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(s.python, "-m", "uvicorn", s.o.App, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--log-level", "warning")
	cmd.Dir = s.dir
	pp := s.pythonPath()
	if old := os.Getenv("PYTHONPATH"); old != "" {
		pp = append(pp, old)
	}
	cmd.Env = append(os.Environ(), "PYTHONPATH="+strings.Join(pp, string(os.PathListSeparator)), "PYTHONUNBUFFERED=1")
	for k, v := range s.o.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	t := &tail{bounded.Tail{Max: 2048}}
	cmd.Stdout, cmd.Stderr = t, t
	// Its own process group, killed whole by Close; and killed with
	// rlpipe should rlpipe die first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, false, &Error{ErrStart, fmt.Sprintf("serve %s: start %s: %v: set rl_options serve: {python: ...} to a Python (or venv) with openenv and uvicorn (scripts/openenv-venv.sh makes .venv-openenv)", s.o.App, s.python, err)}
	}
	s.starts++
	p := &process{cmd: cmd, base: base, tail: t, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		p.at = time.Now()
		close(p.exited)
	}()
	timeout := DefaultStartTimeout
	if s.o.StartTimeoutS > 0 {
		timeout = time.Duration(s.o.StartTimeoutS * float64(time.Second))
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	err = loopback.WaitHealthy(hctx, base+"/health", p.exited)
	cancel()
	if err == nil && !listensOn(cmd.Process.Pid, port) {
		// Another process took the port and answered /health: the
		// episodes must not go to it. Ours would fail to bind.
		p.kill()
		return nil, true, &Error{ErrStart, fmt.Sprintf("serve %s: another process answers on port %d, %d times: stop what takes loopback ports or retry the run", s.o.App, port, maxPortTries)}
	}
	if err != nil {
		p.kill()
		var msg string
		switch {
		case errors.Is(err, loopback.ErrExited) && strings.Contains(p.tail.String(), "address already in use"):
			inUse = true
			msg = fmt.Sprintf("serve %s: port %d was taken by another process before the server bound it, %d times; its stderr ends: %s: stop what takes loopback ports or retry the run", s.o.App, port, maxPortTries, p.tail.String())
		case errors.Is(err, loopback.ErrExited):
			msg = fmt.Sprintf("serve %s: the server exited before /health answered (%v); its stderr ends: %s", s.o.App, p.err, p.tail.String())
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			msg = fmt.Sprintf("serve %s: %s/health did not answer within %v; its stderr ends: %s: raise rl_options serve: {start_timeout_s: ...} or fix the app", s.o.App, base, timeout, p.tail.String())
		default:
			return nil, false, err
		}
		return nil, inUse, &Error{ErrStart, msg}
	}
	return p, false, nil
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
	s.gen++
	s.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// tail keeps the last bytes of the server's stderr.
type tail struct{ bounded.Tail }

// String is the tail's last lines, on one line, "(nothing)" when empty.
func (t *tail) String() string {
	lines := strings.Split(strings.TrimSpace(t.Text()), "\n")
	if len(lines) > 6 {
		lines = lines[len(lines)-6:]
	}
	s := strings.TrimSpace(strings.Join(lines, " | "))
	if s == "" {
		return "(nothing)"
	}
	return s
}

// appDigest is the sha256 of the app's code, so that editing it changes
// the stage's cache key: the top-level package of App's module (every
// .py file under its directory, by sorted relative path, each path and
// content hashed) or its module file, found under Cwd then PythonPath
// as the server's PYTHONPATH finds it. It is "" for an app found nowhere
// there (one installed in the venv: its version is the venv's).
func (s *Server) appDigest() (string, error) {
	module, _, _ := strings.Cut(s.o.App, ":")
	top, _, _ := strings.Cut(module, ".")
	for _, root := range s.pythonPath() {
		h := sha256.New()
		pkg := filepath.Join(root, top)
		if fi, err := os.Stat(pkg); err == nil && fi.IsDir() {
			var files []string
			err := filepath.WalkDir(pkg, func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.IsDir() && d.Name() == "__pycache__" {
					return filepath.SkipDir
				}
				if !d.IsDir() && strings.HasSuffix(path, ".py") {
					files = append(files, path)
				}
				return nil
			})
			if err != nil {
				return "", fmt.Errorf("serve %s: hash the app's code under %s: %w", s.o.App, pkg, err)
			}
			sort.Strings(files)
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					return "", fmt.Errorf("serve %s: hash the app's code: %w", s.o.App, err)
				}
				rel, _ := filepath.Rel(root, f)
				fmt.Fprintf(h, "%s\x00%d\x00", filepath.ToSlash(rel), len(b))
				h.Write(b)
			}
			return "sha256:" + hex.EncodeToString(h.Sum(nil))[:16], nil
		}
		if b, err := os.ReadFile(pkg + ".py"); err == nil {
			fmt.Fprintf(h, "%s.py\x00%d\x00", top, len(b))
			h.Write(b)
			return "sha256:" + hex.EncodeToString(h.Sum(nil))[:16], nil
		}
	}
	return "", nil
}

// pythonPath is the server's PYTHONPATH of its own: Cwd, then
// PythonPath (relative to Cwd).
func (s *Server) pythonPath() []string {
	pp := append([]string{s.dir}, s.o.PythonPath...)
	for i, p := range pp {
		if !filepath.IsAbs(p) {
			pp[i] = filepath.Join(s.dir, p)
		}
	}
	return pp
}

// listensOn reports whether process pid holds a listening TCP socket on
// 127.0.0.1:port (Linux's /proc/net/tcp and /proc/PID/fd); true where
// /proc cannot say.
func listensOn(pid, port int) bool {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return true
	}
	local := fmt.Sprintf("0100007F:%04X", port)
	inode := ""
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == local && f[3] == "0A" { // LISTEN
			inode = f[9]
			break
		}
	}
	if inode == "" {
		return false
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return true
	}
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && l == "socket:["+inode+"]" {
			return true
		}
	}
	return false
}
