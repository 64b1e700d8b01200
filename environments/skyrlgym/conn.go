package skyrlgym

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rlpipe/rlpipe/sandbox"
)

// conn is one running worker process: requests out, replies in, matched
// by the request's id.
type conn interface {
	// call sends req (one line, id inside) and returns its reply line.
	// The error is ctx's when ctx ended first (the process is then
	// killed: it was busy with this request or one before it), or a
	// *lostError when the process ended, broke the protocol or gave no
	// answer within wall (then it is killed).
	call(ctx context.Context, id int64, req []byte, wall time.Duration) ([]byte, error)
	// kill ends the process; alive says whether it still runs.
	kill()
	alive() bool
}

// lostError is a request the process never answered. culprit is true for
// the request the process was serving when it ended — the oldest one
// unanswered — and false for those queued behind it.
type lostError struct {
	culprit bool
	reason  string
}

func (e *lostError) Error() string { return e.reason }

// tail keeps the last bytes written to it: a process's stderr.
type tail struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// last is the last non-empty line written: a traceback's exception.
func (t *tail) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return lastLine(string(t.buf))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// quote shows at most 80 bytes of a line the process wrote.
func quote(b []byte) string {
	if len(b) > 80 {
		return fmt.Sprintf("%q…", b[:80])
	}
	return fmt.Sprintf("%q", b)
}

// pipeConn is a worker run directly (no sandbox), its requests pipelined:
// many episodes' requests may be in flight at once; a reader matches
// each reply to its request by id.
type pipeConn struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tail

	wmu     sync.Mutex // one writer at a time
	mu      sync.Mutex // pending and reason
	pending map[int64]chan []byte
	reason  string        // why it ended, once done is closed
	culprit int64         // the oldest request in flight when it ended
	done    chan struct{} // closed when the process is gone
	ended   atomic.Bool
}

// startPipe starts the interpreter with the worker script, directly.
func startPipe(python string, env []string) (*pipeConn, error) {
	cmd := exec.Command(python, "-I", "-c", string(workerScript))
	cmd.Env = env
	// Its own process group, so a kill also ends what the environment
	// forked (lcb's test processes).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c := &pipeConn{cmd: cmd, stderr: &tail{max: 8 << 10},
		pending: map[int64]chan []byte{}, done: make(chan struct{})}
	cmd.Stderr = c.stderr
	var err error
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go c.read(bufio.NewReaderSize(out, 64<<10))
	return c, nil
}

// read delivers each reply line to its request until the process ends
// or writes a line that is not a reply.
func (c *pipeConn) read(r *bufio.Reader) {
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			werr := c.cmd.Wait()
			how := "the process exited"
			if werr != nil {
				how = "the process ended: " + werr.Error()
			}
			if c.ended.Load() { // killed: the reason is set
				how = ""
			}
			c.fail(how)
			return
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		var head struct {
			ID *int64 `json:"id"`
		}
		if json.Unmarshal(line, &head) != nil || head.ID == nil {
			c.fail(fmt.Sprintf("the process wrote %s on the protocol stream, not a reply (an environment must print to stdout or stderr, never to the worker's protocol fd)", quote(line)))
			_ = c.cmd.Wait()
			return
		}
		c.mu.Lock()
		ch, ok := c.pending[*head.ID]
		delete(c.pending, *head.ID)
		c.mu.Unlock()
		if ok {
			ch <- line
		}
	}
}

// fail ends the process, for reason (kept when one was set before), and
// fails every request in flight: the oldest is the culprit.
func (c *pipeConn) fail(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reason == "" && reason != "" {
		if t := c.stderr.last(); t != "" && !strings.Contains(reason, "protocol stream") {
			reason += " (stderr: " + t + ")"
		}
		c.reason = reason
	}
	if !c.ended.Swap(true) {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	}
	select {
	case <-c.done:
		return
	default:
	}
	c.culprit = -1
	for id := range c.pending {
		if c.culprit < 0 || id < c.culprit {
			c.culprit = id
		}
	}
	close(c.done)
	c.pending = nil
}

func (c *pipeConn) kill() { c.fail("the process was stopped") }

func (c *pipeConn) alive() bool { return !c.ended.Load() }

func (c *pipeConn) call(ctx context.Context, id int64, req []byte, wall time.Duration) ([]byte, error) {
	ch := make(chan []byte, 1)
	c.mu.Lock()
	if c.pending == nil {
		c.mu.Unlock()
		return nil, &lostError{reason: c.why()}
	}
	c.pending[id] = ch
	c.mu.Unlock()
	c.wmu.Lock()
	_, err := c.stdin.Write(append(req, '\n'))
	c.wmu.Unlock()
	if err != nil {
		c.fail("its input closed: " + err.Error())
	}
	timer := time.NewTimer(wall)
	defer timer.Stop()
	select {
	case line := <-ch:
		return line, nil
	case <-c.done:
		select { // answered just before the end
		case line := <-ch:
			return line, nil
		default:
		}
		return nil, c.lost(id)
	case <-timer.C:
		c.fail(fmt.Sprintf("no answer within the request timeout of %s", wall))
		return nil, c.lost(id)
	case <-ctx.Done():
		c.fail("the process was stopped when an episode's budget ended during its request")
		return nil, ctx.Err()
	}
}

// lost is the error of request id after the process ended: it was the
// culprit when it was the oldest in flight.
func (c *pipeConn) lost(id int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &lostError{culprit: id == c.culprit, reason: c.reason}
}

func (c *pipeConn) why() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

var _ conn = (*pipeConn)(nil)

// sandboxConn is a worker in rlpipe's sandbox (sandbox.Start): one
// request at a time, as sandbox.Process serves them.
type sandboxConn struct {
	p         *sandbox.Process
	blamed    atomic.Bool            // a request was already named the culprit
	killedFor atomic.Pointer[string] // why it was killed, when this side killed it
}

func (c *sandboxConn) call(ctx context.Context, id int64, req []byte, wall time.Duration) ([]byte, error) {
	// The sandbox's own wall limit is the longest of them all (a start's);
	// this request's is a deadline, which kills the process too.
	rctx, cancel := context.WithTimeout(ctx, wall)
	defer cancel()
	line, err := c.p.Call(rctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if rctx.Err() != nil {
			msg := fmt.Sprintf("no answer within the request timeout of %s", wall)
			c.killedFor.Store(&msg)
			return nil, &lostError{culprit: !c.blamed.Swap(true), reason: msg}
		}
		return nil, &lostError{culprit: !c.blamed.Swap(true), reason: c.why()}
	}
	var head struct {
		ID *int64 `json:"id"`
	}
	if json.Unmarshal(line, &head) != nil || head.ID == nil || *head.ID != id {
		msg := fmt.Sprintf("the process wrote %s on the protocol stream, not a reply (an environment must print to stdout or stderr, never to the worker's protocol fd)", quote(line))
		c.killedFor.Store(&msg)
		c.p.Kill()
		return nil, &lostError{culprit: !c.blamed.Swap(true), reason: msg}
	}
	return line, nil
}

func (c *sandboxConn) why() string {
	if g := c.killedFor.Load(); g != nil {
		return *g
	}
	r, _ := c.p.Wait()
	how := "the process ended: " + c.p.How()
	if t := lastLine(r.Stderr); t != "" {
		how += " (stderr: " + t + ")"
	}
	return how
}

func (c *sandboxConn) kill()       { c.p.Kill() }
func (c *sandboxConn) alive() bool { return c.p.How() == "" }

var _ conn = (*sandboxConn)(nil)
