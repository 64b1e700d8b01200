package supervisor_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/pipeline/temporalrun/supervisor"
)

// childMode, when set, makes the test binary a stand-in worker process.
const childMode = "SUPERVISOR_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childMode) {
	case "":
		os.Exit(m.Run())
	case "worker":
		os.Exit(standInWorker())
	case "crash":
		fmt.Fprintln(os.Stderr, "pipeline.yaml:3:1: unknown key \"iteratons\"")
		os.Exit(1)
	}
}

// standInWorker writes an rlpipe worker's lines: a plain line when it
// starts, an attempt started at SIGUSR1 and finished at SIGUSR2 (JSON log
// lines), and on SIGTERM a line saying how many attempts it ran then.
func standInWorker() int {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM)
	fmt.Fprintf(os.Stderr, "rlpipe worker: serving x (pid %d)\n", os.Getpid())
	busy := 0
	for s := range sig {
		switch s {
		case syscall.SIGUSR1:
			busy++
			fmt.Fprintln(os.Stderr, `{"level":"info","env":"x","message":"attempt started"}`)
		case syscall.SIGUSR2:
			busy--
			fmt.Fprintln(os.Stderr, `{"level":"info","env":"x","message":"attempt finished"}`)
		case syscall.SIGTERM:
			fmt.Fprintf(os.Stderr, "{\"level\":\"warn\",\"message\":\"stopped with %d attempts running\"}\n", busy)
			return 0
		}
	}
	return 0
}

// backlog is a backlog the test sets.
type backlog struct{ n atomic.Int64 }

func (b *backlog) Backlog(context.Context, string) (int, error) { return int(b.n.Load()), nil }

// rig runs the supervisor over stand-in workers of environment x.
type rig struct {
	t       *testing.T
	backlog backlog
	samples chan supervisor.Sample
	out     standintest.LogBuffer
	log     standintest.LogBuffer
	done    chan error
	cancel  context.CancelFunc
}

func startRig(t *testing.T, mode string, limits supervisor.Limits, idle time.Duration) *rig {
	t.Helper()
	r := &rig{t: t, samples: make(chan supervisor.Sample, 1024), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	o := supervisor.Options{
		Envs:    []supervisor.Env{{Name: "x", Queue: "q/x", Limits: limits, Capacity: 1}},
		Backlog: &r.backlog,
		Command: func(env string) *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childMode+"="+mode)
			return cmd
		},
		Poll:        20 * time.Millisecond,
		IdleTimeout: idle,
		StopGrace:   10 * time.Second,
		Output:      &r.out,
		Logger:      zerolog.New(&r.log).Level(zerolog.WarnLevel),
		Observe: func(s supervisor.Sample) {
			select {
			case r.samples <- s:
			default: // the test reads the latest ones
			}
		},
	}
	go func() { r.done <- supervisor.Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// until waits for a sample that satisfies ok: it fails the test after a
// minute without one (a guard, not a measure) or when Run ends.
func (r *rig) until(what string, ok func(supervisor.Sample) bool) supervisor.Sample {
	r.t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case s := <-r.samples:
			if ok(s) {
				return s
			}
		case err := <-r.done:
			r.t.Fatalf("the supervisor ended (%v) before %s; its log:\n%s", err, what, r.log.String())
		case <-deadline:
			r.t.Fatalf("no sample showed %s; output:\n%s\nlog:\n%s", what, r.out.String(), r.log.String())
		}
	}
}

// ready waits until the stand-in worker pid has said it serves: its
// signal handlers are in place.
func (r *rig) ready(pid int) {
	r.t.Helper()
	line := fmt.Sprintf("serving x (pid %d)", pid)
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(r.out.String(), line) {
		if time.Now().After(deadline) {
			r.t.Fatalf("process %d never said it serves; output:\n%s", pid, r.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func signalPID(t *testing.T, pid int, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatal(err)
	}
}

// TestRunFollowsTheBacklog: processes start as the backlog grows, up to
// the maximum; a process running an attempt is not stopped, and each
// stops once idle for the timeout, down to the minimum.
func TestRunFollowsTheBacklog(t *testing.T) {
	r := startRig(t, "worker", supervisor.Limits{Min: 1, Max: 3}, 100*time.Millisecond)
	first := r.until("the minimum of 1 process", func(s supervisor.Sample) bool { return s.Procs == 1 })
	r.backlog.n.Store(5)
	up := r.until("3 processes for a backlog of 5", func(s supervisor.Sample) bool { return s.Procs == 3 })
	if up.Want != 3 {
		t.Errorf("want %d at the maximum, want 3", up.Want)
	}
	// Two of them take an attempt, and the backlog is gone.
	busyA, busyB := up.PIDs[0], up.PIDs[2]
	for _, pid := range up.PIDs {
		r.ready(pid)
	}
	signalPID(t, busyA, syscall.SIGUSR1)
	signalPID(t, busyB, syscall.SIGUSR1)
	r.until("2 busy processes", func(s supervisor.Sample) bool { return s.Busy == 2 })
	r.backlog.n.Store(0)
	s := r.until("the idle process stopped", func(s supervisor.Sample) bool { return s.Procs == 2 })
	if !slices.Equal(s.PIDs, []int{busyA, busyB}) {
		t.Fatalf("running %v after the idle one stopped, want the busy %d and %d", s.PIDs, busyA, busyB)
	}
	// The attempts end; one process stays (the minimum).
	signalPID(t, busyA, syscall.SIGUSR2)
	signalPID(t, busyB, syscall.SIGUSR2)
	s = r.until("the minimum again", func(s supervisor.Sample) bool { return s.Procs == 1 && s.Stopping == 0 && s.Busy == 0 })
	if len(s.PIDs) != 1 || !slices.Contains([]int{first.PIDs[0], busyA, busyB}, s.PIDs[0]) {
		t.Errorf("the process kept is %v, not one of those started", s.PIDs)
	}
	// Every process stopped was idle, and the stand-in's plain and warn
	// lines reached the output while its info lines did not.
	out := r.out.String()
	if n := strings.Count(out, `"stopped with 0 attempts running"`); n != 2 {
		t.Errorf("%d processes stopped idle, want 2; output:\n%s", n, out)
	}
	if strings.Contains(out, "stopped with 1") {
		t.Errorf("a busy process was stopped; output:\n%s", out)
	}
	if strings.Count(out, "rlpipe worker: serving x") != 3 || strings.Contains(out, "attempt started") {
		t.Errorf("output has not the 3 serving lines without info lines:\n%s", out)
	}
}

// TestRunReplacesAKilledProcess: a process SIGKILLed while it runs an
// attempt is forgotten with a warning naming it, and another starts to
// keep the minimum.
func TestRunReplacesAKilledProcess(t *testing.T) {
	r := startRig(t, "worker", supervisor.Limits{Min: 1, Max: 2}, time.Hour)
	s := r.until("the minimum of 1 process", func(s supervisor.Sample) bool { return s.Procs == 1 })
	victim := s.PIDs[0]
	r.ready(victim)
	signalPID(t, victim, syscall.SIGUSR1)
	r.until("its attempt", func(s supervisor.Sample) bool { return s.Busy == 1 })
	signalPID(t, victim, syscall.SIGKILL)
	s = r.until("another process", func(s supervisor.Sample) bool { return s.Procs == 1 && s.PIDs[0] != victim })
	if s.Busy != 0 {
		t.Errorf("the new process counts %d attempts, want 0", s.Busy)
	}
	log := r.log.String()
	for _, want := range []string{fmt.Sprintf(`"pid":%d,"status":"signal: killed"`, victim), `"attempts":1,"last_line":"{\"level\":\"info\",\"env\":\"x\",\"message\":\"attempt started\"}"`,
		`"message":"a worker process exited by itself; its attempts run again elsewhere once their heartbeats time out, and the next poll starts another process if the backlog wants one"`} {
		if !strings.Contains(log, want) {
			t.Errorf("the log has no %s:\n%s", want, log)
		}
	}
}

// TestRunStopsOnACrashLoop: processes that exit as soon as they start
// end Run after three, naming the environment and the last line.
func TestRunStopsOnACrashLoop(t *testing.T) {
	r := startRig(t, "crash", supervisor.Limits{Min: 1, Max: 1}, time.Hour)
	var err error
	select {
	case err = <-r.done:
	case <-time.After(time.Minute):
		t.Fatal("the supervisor never gave up on the crashing processes")
	}
	r.done <- err // for the cleanup
	want := "worker processes keep exiting: 3 worker processes of environment x in a row exited within 10s of their start, the last with exit status 1; its last line: pipeline.yaml:3:1: unknown key \"iteratons\"\n" +
		"hint: run its command by hand to see why (`rlpipe worker --env x` with the same config, store and --temporal)"
	if !errors.Is(err, supervisor.ErrCrashLoop) || err.Error() != want {
		t.Fatalf("Run: %v\nwant %s", err, want)
	}
}

func TestRunBadOptions(t *testing.T) {
	cmd := func(string) *exec.Cmd { return exec.Command("true") }
	var b backlog
	for _, tc := range []struct {
		name string
		o    supervisor.Options
		want string
	}{
		{"no environment", supervisor.Options{Backlog: &b, Command: cmd}, "supervisor options: name at least one environment, a backlog and a command"},
		{"no command", supervisor.Options{Envs: []supervisor.Env{{Name: "x", Limits: supervisor.Limits{Max: 1}}}, Backlog: &b},
			"supervisor options: name at least one environment, a backlog and a command"},
		{"bad limits", supervisor.Options{Envs: []supervisor.Env{{Name: "x", Limits: supervisor.Limits{Min: 2, Max: 1}}}, Backlog: &b, Command: cmd},
			"supervisor options: environment x: limits 2:1, need 0 <= min <= max and max >= 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := supervisor.Run(context.Background(), tc.o)
			if !errors.Is(err, supervisor.ErrOptions) || err.Error() != tc.want {
				t.Fatalf("Run: %v, want %q", err, tc.want)
			}
		})
	}
}

// failing is a backlog Temporal cannot answer.
type failing struct{}

func (failing) Backlog(context.Context, string) (int, error) {
	return 0, errors.New("describe task queue q/x (TASK_QUEUE_TYPE_ACTIVITY tasks): connection refused")
}

// TestRunKeepsGoingWhenTheBacklogFails: a backlog that cannot be read is
// a warning at each poll, naming the environment and the error; the
// supervisor starts and stops nothing on it and keeps polling.
func TestRunKeepsGoingWhenTheBacklogFails(t *testing.T) {
	var log standintest.LogBuffer
	ctx, cancel := context.WithCancel(context.Background())
	started := atomic.Int64{}
	done := make(chan error, 1)
	go func() {
		done <- supervisor.Run(ctx, supervisor.Options{
			Envs:    []supervisor.Env{{Name: "x", Queue: "q/x", Limits: supervisor.Limits{Min: 1, Max: 2}}},
			Backlog: failing{},
			Command: func(string) *exec.Cmd { started.Add(1); return exec.Command("true") },
			Poll:    10 * time.Millisecond,
			Logger:  zerolog.New(&log),
		})
	}()
	want := `{"level":"warn","error":"describe task queue q/x (TASK_QUEUE_TYPE_ACTIVITY tasks): connection refused","env":"x","message":"read the backlog; keeping the processes as they are"}` + "\n"
	deadline := time.Now().Add(time.Minute)
	for strings.Count(log.String(), want) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("no three warnings; log:\n%s", log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := started.Load(); n != 0 {
		t.Errorf("%d processes started on an unread backlog", n)
	}
	if got := strings.ReplaceAll(log.String(), want, ""); got != "" {
		t.Errorf("other log lines: %s", got)
	}
}
