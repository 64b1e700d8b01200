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

	"github.com/rlpipe/rlpipe/internal/bounded"
	"github.com/rlpipe/rlpipe/sandbox"
)

// conn is one running worker process: requests out, replies in, matched
// by the request's id.
type conn interface {
	// call sends req (one line, id inside) and returns its reply line.
	// The error is ctx's when ctx ended first: nothing is sent when it
	// had ended already, a request still waiting its turn is dropped, and
	// only the one being served kills the process (it is then the
	// culprit). Or a *lostError when the process ended, broke the
	// protocol or gave no answer within wall, counted from when it
	// started serving the request (then it is killed).
	call(ctx context.Context, id int64, req []byte, wall time.Duration) ([]byte, error)
	// post sends req (a close) without waiting for its reply, which is
	// discarded, and returns at once: it never waits behind another
	// request. It is written (its turn, its clock, its blame as call's)
	// at once when the process is idle, else just ahead of the next
	// request call sends. A process that ends first takes it along.
	post(id int64, req []byte, wall time.Duration)
	// kill ends the process; alive says whether it still runs.
	kill()
	alive() bool
}

// lostError is a request the process never answered. culprit is true for
// the request the process was serving when it ended — the oldest one
// written and unanswered — and false for those queued behind it.
type lostError struct {
	culprit bool
	reason  string
}

func (e *lostError) Error() string { return e.reason }

// tail keeps the last bytes written to it: a process's stderr.
type tail struct{ bounded.Tail }

// last is the last non-empty line written: a traceback's exception.
func (t *tail) last() string {
	return lastLine(t.Text())
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
// each reply to its request by id. The worker serves them one at a time,
// in the order they were written: the head of the queue is the one being
// served, the only one whose clock runs and the only one a crash or a
// timeout blames.
type pipeConn struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tail

	// A request joins queue under wmu, just before it is written, so
	// queue order is write order (not id order: ids are taken earlier).
	wmu     sync.Mutex // one writer at a time
	mu      sync.Mutex // queue, byID, pending, reason, culprit
	queue   []*request // in flight, in write order: queue[0] is being served
	byID    map[int64]*request
	pending []*request // posted, written ahead of the next request

	reason  string        // why it ended, once done is closed
	culprit *request      // the request being served when it ended, if any
	done    chan struct{} // closed when the process is gone
	ended   atomic.Bool
}

// request is one request in flight on a pipeConn.
type request struct {
	id    int64
	ch    chan []byte // its reply; buffered, so a dropped request's reply is discarded
	wall  time.Duration
	clock *time.Timer // runs while it is being served
	line  []byte      // a posted request's line, until it is written
}

// startPipe starts the interpreter with the worker script, directly.
func startPipe(python string, env []string) (*pipeConn, error) {
	cmd := exec.Command(python, "-I", "-c", string(workerScript))
	cmd.Env = env
	// Its own process group, so a kill also ends what the environment
	// forked (lcb's test processes); killed when rlpipe ends, even while
	// it is busy in a step.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// A child that left the process group and holds stderr open does not
	// keep Wait, and so the restart, waiting.
	cmd.WaitDelay = time.Second
	c := &pipeConn{cmd: cmd, stderr: &tail{bounded.Tail{Max: 8 << 10}},
		byID: map[int64]*request{}, done: make(chan struct{})}
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
			// The worker's own status first, then kill its process group
			// before cmd.Wait: an env's children holding stderr would keep
			// cmd.Wait (it drains stderr) from returning.
			killed := c.ended.Load()
			state, werr := c.cmd.Process.Wait()
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			_ = c.cmd.Wait() // stderr drained (bounded by WaitDelay); the status is state's
			how := "the process exited"
			switch {
			case werr != nil:
				how = "the process ended: " + werr.Error()
			case !state.Success():
				how = "the process ended: " + state.String()
			}
			if killed { // killed by this side: the reason is set
				how = ""
			}
			c.fail(how, nil)
			return
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		var head struct {
			ID *int64 `json:"id"`
		}
		if json.Unmarshal(line, &head) != nil || head.ID == nil {
			c.fail(fmt.Sprintf("the process wrote %s on the protocol stream, not a reply (an environment must print to stdout or stderr, never to the worker's protocol fd)", quote(line)), nil)
			_ = c.cmd.Wait()
			return
		}
		c.mu.Lock()
		if req, ok := c.byID[*head.ID]; ok {
			c.removeLocked(req)
			req.ch <- line
		}
		c.mu.Unlock()
	}
}

// removeLocked takes req out of the queue; when it was being served, the
// next request's clock starts. c.mu is held.
func (c *pipeConn) removeLocked(req *request) {
	delete(c.byID, req.id)
	if req.clock != nil {
		req.clock.Stop()
	}
	for i, q := range c.queue {
		if q == req {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			if i == 0 && len(c.queue) > 0 {
				c.serveLocked(c.queue[0])
			}
			return
		}
	}
}

// serveLocked starts the clock of req, now being served: past its wall
// the process is killed and req is the culprit. c.mu is held.
func (c *pipeConn) serveLocked(req *request) {
	req.clock = time.AfterFunc(req.wall, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.queue) > 0 && c.queue[0] == req {
			c.failLocked(fmt.Sprintf("no answer within the request timeout of %s", req.wall), req)
		}
	})
}

// fail ends the process, for reason (kept when one was set before), and
// fails every request in flight: culprit, or else the one being served,
// is to blame.
func (c *pipeConn) fail(reason string, culprit *request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failLocked(reason, culprit)
}

func (c *pipeConn) failLocked(reason string, culprit *request) {
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
	if culprit == nil && len(c.queue) > 0 {
		culprit = c.queue[0]
	}
	c.culprit = culprit
	for _, q := range c.queue {
		if q.clock != nil {
			q.clock.Stop()
		}
	}
	close(c.done)
	c.queue, c.byID, c.pending = nil, nil, nil
}

func (c *pipeConn) kill() { c.fail("the process was stopped", nil) }

func (c *pipeConn) alive() bool { return !c.ended.Load() }

func (c *pipeConn) call(ctx context.Context, id int64, line []byte, wall time.Duration) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // never sent: nothing to kill
	}
	req := &request{id: id, ch: make(chan []byte, 1), wall: wall, line: line}
	c.wmu.Lock()
	c.mu.Lock()
	if c.byID == nil {
		c.mu.Unlock()
		c.wmu.Unlock()
		return nil, &lostError{reason: c.why()}
	}
	// The posted requests go first: their envs' episodes ended before.
	out := c.enqueueLocked(append(c.pending, req)...)
	c.pending = nil
	c.mu.Unlock()
	c.write(out)
	c.wmu.Unlock()
	select {
	case line := <-req.ch:
		return line, nil
	case <-c.done:
		select { // answered just before the end
		case line := <-req.ch:
			return line, nil
		default:
		}
		return nil, c.lost(req)
	case <-ctx.Done():
		c.mu.Lock()
		defer c.mu.Unlock()
		select { // answered meanwhile
		case line := <-req.ch:
			return line, nil
		default:
		}
		// Being served: the process is busy with this request, so it is
		// killed and this request is the culprit. Queued behind another:
		// it is dropped; the reader discards its reply.
		if len(c.queue) > 0 && c.queue[0] == req {
			c.failLocked("the process was stopped when an episode's budget ended during its request", req)
		}
		return nil, ctx.Err()
	}
}

func (c *pipeConn) post(id int64, line []byte, wall time.Duration) {
	req := &request{id: id, ch: make(chan []byte, 1), wall: wall, line: line}
	// Idle (nothing in flight, no writer): the process has read every
	// line written, so this one goes at once and its write cannot block.
	// Otherwise it waits in pending: a writer or a full pipe would make
	// End wait on another episode's request.
	idle := c.wmu.TryLock()
	c.mu.Lock()
	if c.byID == nil {
		c.mu.Unlock()
	} else if !idle || len(c.queue) > 0 {
		c.pending = append(c.pending, req)
		c.mu.Unlock()
	} else {
		out := c.enqueueLocked(req)
		c.mu.Unlock()
		c.write(out)
	}
	if idle {
		c.wmu.Unlock()
	}
}

// enqueueLocked puts reqs in flight, in order, and returns their lines
// to write. c.mu is held, and c.wmu: the queue's order is write order.
func (c *pipeConn) enqueueLocked(reqs ...*request) []byte {
	var out []byte
	for _, r := range reqs {
		c.byID[r.id] = r
		c.queue = append(c.queue, r)
		if len(c.queue) == 1 {
			c.serveLocked(r)
		}
		out = append(append(out, r.line...), '\n')
		r.line = nil
	}
	return out
}

// write writes lines to the process; c.wmu is held.
func (c *pipeConn) write(lines []byte) {
	if _, err := c.stdin.Write(lines); err != nil {
		c.fail("its input closed: "+err.Error(), nil)
	}
}

// lost is the error of req after the process ended: req was the culprit
// when it was being served.
func (c *pipeConn) lost(req *request) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &lostError{culprit: req == c.culprit, reason: c.reason}
}

func (c *pipeConn) why() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

var _ conn = (*pipeConn)(nil)

// sandboxConn is a worker in rlpipe's sandbox (sandbox.Start): one
// request at a time, as sandbox.Process serves them; turn makes the
// requests queue here, so a request's clock starts when its turn comes.
type sandboxConn struct {
	p         *sandbox.Process
	turn      chan struct{}          // held by the request being served
	blamed    atomic.Bool            // a request was already named the culprit
	killedFor atomic.Pointer[string] // why it was killed, when this side killed it

	mu      sync.Mutex
	pending []posted // posted while another request had the turn
}

// posted is a request sent without waiting for its reply.
type posted struct {
	line []byte
	wall time.Duration
}

func newSandboxConn(p *sandbox.Process) *sandboxConn {
	return &sandboxConn{p: p, turn: make(chan struct{}, 1)}
}

func (c *sandboxConn) call(ctx context.Context, id int64, req []byte, wall time.Duration) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // never sent: nothing to kill
	}
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err() // never sent: nothing to kill
	}
	defer func() { <-c.turn }()
	// The posted requests first, in this turn: their envs' episodes ended
	// before. Each is served to its end (at most its wall), as a request
	// ahead in turn would be; then this one is sent only if its caller
	// still waits.
	if err := c.flush(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err // never sent: nothing to kill
	}
	// The sandbox's own wall limit is the longest of them all (a start's);
	// this request's is a deadline from its turn, which kills the process
	// too.
	rctx, cancel := context.WithTimeout(ctx, wall)
	defer cancel()
	line, err := c.p.Call(rctx, req)
	if err != nil {
		if ctx.Err() != nil {
			// The process was serving this request when the caller's
			// budget ended: it was killed for it, and this request is the
			// culprit, not the next one in turn.
			msg := "the process was stopped when an episode's budget ended during its request"
			c.killedFor.CompareAndSwap(nil, &msg)
			c.blamed.Store(true)
			return nil, ctx.Err()
		}
		if rctx.Err() != nil {
			msg := fmt.Sprintf("no answer within the request timeout of %s", wall)
			c.killedFor.CompareAndSwap(nil, &msg)
		}
		return nil, &lostError{culprit: !c.blamed.Swap(true), reason: c.why()}
	}
	var head struct {
		ID *int64 `json:"id"`
	}
	if json.Unmarshal(line, &head) != nil || head.ID == nil || *head.ID != id {
		msg := fmt.Sprintf("the process wrote %s on the protocol stream, not a reply (an environment must print to stdout or stderr, never to the worker's protocol fd)", quote(line))
		c.killedFor.CompareAndSwap(nil, &msg)
		c.p.Kill()
		return nil, &lostError{culprit: !c.blamed.Swap(true), reason: c.why()}
	}
	return line, nil
}

// post sends line at once when no request has the turn (the process is
// idle, so only this close's own answer is waited for), else leaves it
// for the next request's turn.
func (c *sandboxConn) post(_ int64, line []byte, wall time.Duration) {
	c.mu.Lock()
	c.pending = append(c.pending, posted{line, wall})
	c.mu.Unlock()
	select {
	case c.turn <- struct{}{}:
		_ = c.flush()
		<-c.turn
	default:
	}
}

// flush sends the posted requests, their replies discarded; the turn is
// held. A process that ends or hangs on one is killed, and the error is
// a *lostError that blames no episode.
func (c *sandboxConn) flush() error {
	c.mu.Lock()
	reqs := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, r := range reqs {
		rctx, cancel := context.WithTimeout(context.Background(), r.wall)
		_, err := c.p.Call(rctx, r.line)
		cancel()
		if err != nil {
			if rctx.Err() != nil {
				msg := fmt.Sprintf("no answer to a close within the request timeout of %s", r.wall)
				c.killedFor.CompareAndSwap(nil, &msg)
			}
			c.blamed.Store(true) // the close was the culprit
			return &lostError{reason: c.why()}
		}
	}
	return nil
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
