package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Process is a long-lived sandboxed program that answers requests over
// its standard input and output, one line each: a worker that loads its
// code once (a Python interpreter and its imports) and then serves many
// batches. Start starts one; Call sends a request and reads the answer;
// Kill and Wait end it.
//
// A Process has every guarantee of Run: the same namespaces (no network),
// read-only root and binds, seccomp filter, rlimits, cgroup and
// kill-on-exit (a kill -9 of this process ends it). Its limits apply
// differently, because it lives across requests:
//
//   - Wall bounds each request: a Call with no answer within Wall kills
//     the process, and Wait reports StatusTimeout. The caller starts a
//     new one for the next request.
//   - CPUTime, MemoryBytes, Procs and FileBytes bound the process's whole
//     life, as they bound a run.
//   - OutputBytes bounds each answer line (a longer one kills the
//     process: StatusOutputLimit) and the stderr kept (the rest is
//     drained, not kept).
//
// A Process serves one request at a time; Call is safe to call from
// several goroutines, which then take turns.
type Process struct {
	b      *box
	ctx    context.Context
	stdin  *os.File
	stdout *bufio.Reader
	stderr *capWriter
	lim    Limits

	mu     sync.Mutex // one request at a time
	calls  int
	killed struct{ wall, output, caller atomic.Bool }
	done   chan struct{} // closed once res and err are set
	res    Result
	err    error
}

// ErrEnded is returned by Call when the process ended before it answered:
// it exited, crashed, or was killed at a limit or by Kill. Wait returns
// how it ended.
var ErrEnded = errors.New("sandboxed process ended")

// Start starts s.Command in a new sandbox and returns at once, the
// command running with pipes on its stdin and stdout. ctx bounds the
// process's life, as exec.CommandContext's does: when it ends the
// process is killed. s.Stdin must be nil (requests go through Call) and
// s.Verdict false (a worker's answer is what it prints).
//
// The error is non-nil only when the process did not start: ErrInvalid
// for a bad Spec, ErrInfra when the sandbox could not be set up.
func Start(ctx context.Context, s Spec) (*Process, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	if s.Stdin != nil {
		return nil, fmt.Errorf("a started process reads its requests from Call, not Stdin: %w", ErrInvalid)
	}
	if s.Verdict {
		return nil, fmt.Errorf("a started process has no verdict channel: judge its answers in a Run: %w", ErrInvalid)
	}
	lim := s.Limits.withDefaults()
	if err := checkFileSizes(s.Files, lim.FileBytes); err != nil {
		return nil, err
	}
	t, err := findTools(s)
	if err != nil {
		return nil, err
	}
	work, fds, cleanup, err := stageWorkspace(ctx, s.Files)
	defer cleanup()
	if err != nil {
		return nil, err
	}
	b, err := setUp(ctx, ctx, s, lim, t, workspaceTmpfs, work, fds)
	if err != nil {
		b.release()
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		b.release()
		return nil, fmt.Errorf("create the stdin pipe: %v: %w", err, ErrInfra)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll([]*os.File{inR, inW})
		b.release()
		return nil, fmt.Errorf("create the stdout pipe: %v: %w", err, ErrInfra)
	}
	p := &Process{b: b, ctx: ctx, stdin: inW, stdout: bufio.NewReader(outR), lim: lim,
		stderr: &capWriter{limit: lim.OutputBytes, full: func() {}}, done: make(chan struct{})}
	b.cmd.Stdin, b.cmd.Stdout, b.cmd.Stderr = inR, outW, p.stderr
	err = b.begin(ctx)
	closeAll([]*os.File{inR, outW}) // the sandbox holds its own ends
	if err != nil {
		closeAll([]*os.File{inW, outR})
		b.release()
		return nil, err
	}
	go func() {
		defer close(p.done)
		defer b.release()
		defer closeAll([]*os.File{inW, outR})
		<-b.waited
		p.res, p.err = b.result(ctx, "", p.stderr.String(), p.killed.output.Load(), p.killed.wall.Load())
		if p.killed.caller.Load() && p.err == nil {
			p.res.Status = StatusCanceled
		}
	}()
	return p, nil
}

// Call sends request, one line without a newline, and returns the
// process's answer line, without its newline. A request that gets no
// answer within Limits.Wall kills the process. The error wraps ErrEnded
// when the process ended before answering (Wait says how), or ctx's
// error when ctx ended first (the process is killed then too: its next
// answer would belong to this request).
func (p *Process) Call(ctx context.Context, request []byte) ([]byte, error) {
	if bytes.IndexByte(request, '\n') >= 0 {
		return nil, fmt.Errorf("a request is one line: it holds a newline: %w", ErrInvalid)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	n := p.calls
	select {
	case <-p.done:
		return nil, p.ended(n)
	default:
	}
	timer := time.AfterFunc(p.lim.Wall, func() {
		p.killed.wall.Store(true)
		_ = p.b.kill()
	})
	defer timer.Stop()
	var byCtx atomic.Bool
	stop := context.AfterFunc(ctx, func() {
		byCtx.Store(true)
		p.killed.caller.Store(true)
		_ = p.b.kill()
	})
	defer stop()
	line, err := p.exchange(request)
	if err == nil {
		return line, nil
	}
	if byCtx.Load() {
		<-p.done
		return nil, fmt.Errorf("request %d: %w", n, ctx.Err())
	}
	return nil, p.ended(n)
}

// exchange writes request and reads one answer line of at most
// OutputBytes; a longer one kills the process.
func (p *Process) exchange(request []byte) ([]byte, error) {
	msg := make([]byte, 0, len(request)+1)
	msg = append(append(msg, request...), '\n')
	if _, err := p.stdin.Write(msg); err != nil {
		return nil, err
	}
	var line []byte
	for {
		chunk, err := p.stdout.ReadSlice('\n')
		if int64(len(line)+len(chunk)) > p.lim.OutputBytes+1 {
			p.killed.output.Store(true)
			_ = p.b.kill()
			return nil, errors.New("answer too long")
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err
		}
	}
}

// ended waits for the process's end and says how it ended, for request n.
func (p *Process) ended(n int) error {
	<-p.done
	if p.err != nil {
		return fmt.Errorf("request %d: the process had ended: %v: %w", n, p.err, ErrEnded)
	}
	return fmt.Errorf("request %d: the process ended without an answer: %s: %w", n, p.How(), ErrEnded)
}

// How says how the process ended, once it has: its status and the limit
// or exit code behind it, e.g. "timeout (no answer within the wall limit
// 2s)"; "" while it runs.
func (p *Process) How() string {
	select {
	case <-p.done:
	default:
		return ""
	}
	if p.err != nil {
		return p.err.Error()
	}
	how := string(p.res.Status)
	switch p.res.Status {
	case StatusTimeout:
		if p.killed.wall.Load() {
			how += fmt.Sprintf(" (no answer within the wall limit %s)", p.lim.Wall)
		} else {
			how += fmt.Sprintf(" (CPU time limit %s)", p.lim.CPUTime)
		}
	case StatusMemory:
		how += fmt.Sprintf(" (memory limit %d MiB)", p.lim.MemoryBytes>>20)
	case StatusOutputLimit:
		how += fmt.Sprintf(" (an answer longer than %d bytes)", p.lim.OutputBytes)
	case StatusFailed:
		how += fmt.Sprintf(" (exit code %d)", p.res.ExitCode)
	case StatusSignal:
		how += " (" + p.res.Signal + ")"
	}
	return how
}

// Kill ends the process and waits for it; Wait then reports
// StatusCanceled, unless it had already ended.
func (p *Process) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.killed.caller.Store(true)
	_ = p.b.kill()
	<-p.done
}

// Wait waits for the process to end and returns how it ended, as Run
// would: the Result's Stdout is empty (the answers went to Call) and its
// Stderr holds at most OutputBytes. The error is non-nil when Start's ctx
// ended (StatusCanceled) or bwrap failed to set the sandbox up (ErrInfra).
func (p *Process) Wait() (Result, error) {
	<-p.done
	return p.res, p.err
}

// CloseRequests closes the process's stdin: a worker reading requests
// until end of input exits.
func (p *Process) CloseRequests() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdin.Close()
}
