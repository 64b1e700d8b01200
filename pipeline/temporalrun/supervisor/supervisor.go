package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// Defaults.
const (
	DefaultPoll        = time.Second
	DefaultIdleTimeout = 30 * time.Second
	// DefaultStopGrace is how long Run waits for its processes when it
	// ends: a stopping rlpipe worker takes up to 30 s to let its attempts
	// report.
	DefaultStopGrace = 45 * time.Second
)

// backlogTimeout bounds one read of a backlog, so that a frontend that
// stops answering does not stop the supervisor from reaping and stopping.
const backlogTimeout = 10 * time.Second

// crashWindow and crashLimit: a process that exits by itself this soon
// after it started, crashLimit times in a row for one environment, stops
// Run instead of being started again at every poll.
const (
	crashWindow = 10 * time.Second
	crashLimit  = 3
)

// The messages of the attempt log lines an rlpipe worker writes at info
// level (pipeline/temporalrun), by which Run counts each process's
// attempts.
const (
	msgAttemptStarted  = "attempt started"
	msgAttemptFinished = "attempt finished"
	msgAttemptFailed   = "attempt failed"
)

// Errors.
var (
	// ErrOptions is a Run option missing or out of range.
	ErrOptions = errors.New("supervisor options")
	// ErrCrashLoop: an environment's processes keep exiting right after
	// they start.
	ErrCrashLoop = errors.New("worker processes keep exiting")
)

// Env is one environment the supervisor scales.
type Env struct {
	Name string
	// Queue is the environment's task queue.
	Queue string
	Limits
	// Capacity is how many attempts one process runs at once (default 1).
	Capacity int
}

// Options configure Run.
type Options struct {
	Envs    []Env
	Backlog Backlog
	// Command builds, without starting it, a worker process serving env;
	// it must write its log as JSON lines on stderr at info level or
	// lower. Run sets its Stdout, Stderr and process group.
	Command func(env string) *exec.Cmd
	// Poll is how often the backlog is read (default DefaultPoll).
	Poll time.Duration
	// IdleTimeout is how long a process runs no attempt before it may be
	// stopped (default DefaultIdleTimeout).
	IdleTimeout time.Duration
	// StopGrace bounds the wait for the processes when Run ends; those
	// still running then are killed (default DefaultStopGrace).
	StopGrace time.Duration
	// Output receives the processes' output lines: every line that is not
	// a JSON log line, and log lines at Logger's level or above (default:
	// discarded).
	Output io.Writer
	// Logger receives the supervisor's own lines: a process started,
	// stopped or lost, and at info a line per change of the counts.
	Logger zerolog.Logger
	// Observe, when set, receives each environment's counts at each poll.
	Observe func(Sample)
}

// Sample is an environment's counts at one poll.
type Sample struct {
	Time    time.Time
	Env     string
	Backlog int
	// Procs are the running processes (not counting those stopping),
	// Busy the attempts they run.
	Procs, Stopping, Busy int
	Want                  int
	// PIDs are the running processes, BusyPIDs those of them running at
	// least one attempt.
	PIDs, BusyPIDs []int
}

// proc is one worker process.
type proc struct {
	env       string
	pid       int
	cmd       *exec.Cmd
	started   time.Time
	busy      int
	idleSince time.Time
	stopping  bool
	lastLine  string
}

type supervisor struct {
	o      Options
	mu     sync.Mutex
	procs  map[int]*proc
	exited chan exit
	wg     sync.WaitGroup
	outMu  sync.Mutex
	last   map[string]Sample
	// crashes counts each environment's processes in a row that exited
	// by themselves within crashWindow of their start.
	crashes map[string]int
}

type exit struct {
	p   *proc
	err error
}

// Run keeps each environment's processes between its limits, following
// the backlog, until ctx ends; then it stops them all (SIGTERM, then
// SIGKILL after StopGrace) and returns nil. It returns early with an
// error wrapping ErrCrashLoop when an environment's processes keep
// exiting as soon as they start.
func Run(ctx context.Context, o Options) error {
	if err := o.validate(); err != nil {
		return err
	}
	s := &supervisor{o: o, procs: map[int]*proc{}, exited: make(chan exit, 16), last: map[string]Sample{}, crashes: map[string]int{}}
	defer s.shutdown()
	tick := time.NewTicker(o.Poll)
	defer tick.Stop()
	for {
		if err := s.poll(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case e := <-s.exited:
			if err := s.reap(e); err != nil {
				return err
			}
		case <-tick.C:
		}
	}
}

func (o *Options) validate() error {
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.StopGrace <= 0 {
		o.StopGrace = DefaultStopGrace
	}
	if o.Output == nil {
		o.Output = io.Discard
	}
	if len(o.Envs) == 0 || o.Backlog == nil || o.Command == nil {
		return fmt.Errorf("%w: name at least one environment, a backlog and a command", ErrOptions)
	}
	for _, e := range o.Envs {
		if e.Min < 0 || e.Max < 1 || e.Min > e.Max {
			return fmt.Errorf("%w: environment %s: limits %d:%d, need 0 <= min <= max and max >= 1", ErrOptions, e.Name, e.Min, e.Max)
		}
	}
	return nil
}

// poll reads each environment's backlog and acts on the decision.
func (s *supervisor) poll(ctx context.Context) error {
	for _, e := range s.o.Envs {
		bctx, cancel := context.WithTimeout(ctx, backlogTimeout)
		backlog, err := s.o.Backlog.Backlog(bctx, e.Queue)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// The processes keep running; the next poll tries again.
			s.o.Logger.Warn().Err(err).Str("env", e.Name).Msg("read the backlog; keeping the processes as they are")
			continue
		}
		now := time.Now()
		s.mu.Lock()
		st := State{Limits: e.Limits, Backlog: backlog, Capacity: e.Capacity, IdleTimeout: s.o.IdleTimeout, Now: now}
		for _, p := range s.procs {
			if p.env == e.Name && !p.stopping {
				st.Procs = append(st.Procs, Proc{ID: p.pid, Busy: p.busy, IdleSince: p.idleSince})
			}
		}
		s.mu.Unlock()
		d := Decide(st)
		for _, pid := range d.Stop {
			s.stop(pid, now)
		}
		for range d.Start {
			if err := s.start(e.Name); err != nil {
				return err
			}
		}
		s.observe(e.Name, backlog, d.Want, now)
	}
	return nil
}

// observe records an environment's counts after a poll's actions.
func (s *supervisor) observe(env string, backlog, want int, now time.Time) {
	smp := Sample{Time: now, Env: env, Backlog: backlog, Want: want}
	s.mu.Lock()
	for _, p := range s.procs {
		if p.env != env {
			continue
		}
		if p.stopping {
			smp.Stopping++
			continue
		}
		smp.Procs++
		smp.PIDs = append(smp.PIDs, p.pid)
		smp.Busy += p.busy
		if p.busy > 0 {
			smp.BusyPIDs = append(smp.BusyPIDs, p.pid)
		}
	}
	s.mu.Unlock()
	sort.Ints(smp.PIDs)
	sort.Ints(smp.BusyPIDs)
	if s.o.Observe != nil {
		s.o.Observe(smp)
	}
	prev, seen := s.last[env]
	s.last[env] = smp
	if seen && prev.Backlog == smp.Backlog && prev.Procs == smp.Procs && prev.Stopping == smp.Stopping && prev.Busy == smp.Busy && slices.Equal(prev.PIDs, smp.PIDs) && slices.Equal(prev.BusyPIDs, smp.BusyPIDs) {
		return
	}
	s.o.Logger.Info().Str("env", env).Int("backlog", backlog).Int("processes", smp.Procs).Int("stopping", smp.Stopping).
		Int("busy", smp.Busy).Ints("pids", smp.PIDs).Ints("busy_pids", smp.BusyPIDs).Int("want", want).Msg("scale")
}

// start starts a worker process for env.
func (s *supervisor) start(env string) error {
	cmd := s.o.Command(env)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("start a worker process for environment %s: %w", env, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("start a worker process for environment %s: %w", env, err)
	}
	// Its own process group: Ctrl-C on the supervisor's terminal reaches
	// the supervisor, which stops its processes in order.
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start a worker process for environment %s (%s): %w", env, cmd.Path, err)
	}
	now := time.Now()
	p := &proc{env: env, pid: cmd.Process.Pid, cmd: cmd, started: now, idleSince: now}
	s.mu.Lock()
	s.procs[p.pid] = p
	s.mu.Unlock()
	s.o.Logger.Info().Str("env", env).Int("pid", p.pid).Msg("worker process started")
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var lines sync.WaitGroup
		lines.Add(2)
		go func() { defer lines.Done(); s.follow(p, stdout, false) }()
		go func() { defer lines.Done(); s.follow(p, stderr, true) }()
		lines.Wait()
		s.exited <- exit{p: p, err: cmd.Wait()}
	}()
	return nil
}

// logLine is the part of a JSON log line follow reads.
type logLine struct {
	Level   string `json:"level"`
	Message string `json:"message"`
}

// follow copies a process's output lines to Output and counts its
// attempts from its log lines.
func (s *supervisor) follow(p *proc, r io.Reader, log bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		forward := true
		var l logLine
		if log && len(line) > 0 && line[0] == '{' && json.Unmarshal(line, &l) == nil && l.Message != "" {
			s.count(p, l.Message)
			lvl, err := zerolog.ParseLevel(l.Level)
			forward = err != nil || lvl >= s.o.Logger.GetLevel()
		}
		s.mu.Lock()
		p.lastLine = string(line)
		s.mu.Unlock()
		if forward {
			s.outMu.Lock()
			_, _ = s.o.Output.Write(append(line, '\n'))
			s.outMu.Unlock()
		}
	}
	// The rest of a line longer than the buffer is dropped with it.
	_, _ = io.Copy(io.Discard, r)
}

// count follows a process's attempts from its log messages.
func (s *supervisor) count(p *proc, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch msg {
	case msgAttemptStarted:
		p.busy++
	case msgAttemptFinished, msgAttemptFailed:
		p.busy = max(p.busy-1, 0)
		if p.busy == 0 {
			p.idleSince = time.Now()
		}
	}
}

// stop asks a process to stop (SIGTERM), unless it took an attempt since
// Decide saw it idle: an attempt that started in between would be
// handed over and run again. (A task Temporal hands the process before
// its "attempt started" line is logged can still be caught; it then
// re-runs elsewhere, not counted against retries.)
func (s *supervisor) stop(pid int, now time.Time) {
	s.mu.Lock()
	p := s.procs[pid]
	if p == nil || p.stopping || p.busy > 0 || now.Sub(p.idleSince) < s.o.IdleTimeout {
		s.mu.Unlock()
		return
	}
	p.stopping = true
	idle := now.Sub(p.idleSince)
	s.mu.Unlock()
	s.o.Logger.Info().Str("env", p.env).Int("pid", pid).Dur("idle", idle).Msg("stopping an idle worker process")
	_ = syscall.Kill(pid, syscall.SIGTERM)
}

// reap forgets a process that exited; one that exited by itself is a
// warning, and too many in a row right after their start end Run.
func (s *supervisor) reap(e exit) error {
	s.mu.Lock()
	delete(s.procs, e.p.pid)
	p := *e.p
	s.mu.Unlock()
	status := "exit status 0"
	if e.err != nil {
		status = e.err.Error()
	}
	if p.stopping {
		s.o.Logger.Info().Str("env", p.env).Int("pid", p.pid).Str("status", status).Msg("worker process stopped")
		return nil
	}
	lived := time.Since(p.started)
	s.o.Logger.Warn().Str("env", p.env).Int("pid", p.pid).Str("status", status).Dur("lived", lived).Int("attempts", p.busy).Str("last_line", p.lastLine).
		Msg("a worker process exited by itself; its attempts run again elsewhere once their heartbeats time out, and the next poll starts another process if the backlog wants one")
	if lived >= crashWindow {
		s.crashes[p.env] = 0
		return nil
	}
	s.crashes[p.env]++
	if s.crashes[p.env] >= crashLimit {
		return fmt.Errorf("%w: %d worker processes of environment %s in a row exited within %s of their start, the last with %s; its last line: %s\nhint: run its command by hand to see why (`rlpipe worker --env %s` with the same config, store and --temporal)",
			ErrCrashLoop, crashLimit, p.env, crashWindow, status, p.lastLine, p.env)
	}
	return nil
}

// shutdown stops every process and waits for them, killing those still
// running after StopGrace.
func (s *supervisor) shutdown() {
	s.mu.Lock()
	for _, p := range s.procs {
		if !p.stopping {
			p.stopping = true
			_ = syscall.Kill(p.pid, syscall.SIGTERM)
		}
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	// Drain exits so that no process goroutine blocks on a full channel.
	grace := time.NewTimer(s.o.StopGrace)
	defer grace.Stop()
	for {
		select {
		case e := <-s.exited:
			_ = s.reap(e)
		case <-done:
			for {
				select {
				case e := <-s.exited:
					_ = s.reap(e)
				default:
					return
				}
			}
		case <-grace.C:
			s.mu.Lock()
			for _, p := range s.procs {
				s.o.Logger.Warn().Str("env", p.env).Int("pid", p.pid).Dur("grace", s.o.StopGrace).Msg("a worker process did not stop in time; killing it")
				_ = syscall.Kill(-p.pid, syscall.SIGKILL)
			}
			s.mu.Unlock()
		}
	}
}
