package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestAvailableMissingBinary(t *testing.T) {
	err := available(context.Background(), "/nonexistent/bwrap")
	if !errors.Is(err, ErrNoBwrap) || !errors.Is(err, ErrInfra) {
		t.Fatalf("available(/nonexistent/bwrap) = %v, want ErrNoBwrap wrapping ErrInfra", err)
	}
	for _, want := range []string{"/nonexistent/bwrap", "apt-get install bubblewrap"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		name string
		o    outcome
		want Result
	}{
		{"exit 0", outcome{exitCode: 0}, Result{ExitCode: 0, Status: StatusOK}},
		{"exit 1", outcome{exitCode: 1}, Result{ExitCode: 1, Status: StatusFailed}},
		{"SIGXCPU", outcome{exitCode: 128 + 24, cpuLimitReachable: true},
			Result{ExitCode: 152, Signal: "SIGXCPU", TimedOut: true, Status: StatusTimeout}},
		{"SIGKILL at the hard CPU limit", outcome{exitCode: 137, cpuLimitReachable: true},
			Result{ExitCode: 137, Signal: "SIGKILL", TimedOut: true, Status: StatusTimeout}},
		{"SIGKILL sent by the program itself", outcome{exitCode: 137},
			Result{ExitCode: 137, Signal: "SIGKILL", Status: StatusSignal}},
		{"SIGXCPU raised by the program itself", outcome{exitCode: 128 + 24},
			Result{ExitCode: 152, Signal: "SIGXCPU", Status: StatusSignal}},
		{"SIGSEGV", outcome{exitCode: 139}, Result{ExitCode: 139, Signal: "SIGSEGV", Status: StatusSignal}},
		{"SIGSEGV with the CPU limit reachable", outcome{exitCode: 139, cpuLimitReachable: true},
			Result{ExitCode: 139, Signal: "SIGSEGV", Status: StatusSignal}},
		{"SIGXFSZ", outcome{exitCode: 128 + 25}, Result{ExitCode: 153, Signal: "SIGXFSZ", Status: StatusFileLimit}},
		{"MemoryError", outcome{exitCode: 1, stderr: "Traceback…\nMemoryError\n"},
			Result{ExitCode: 1, Stderr: "Traceback…\nMemoryError\n", MemoryExceeded: true, Status: StatusMemory}},
		{"MemoryError but exit 0", outcome{exitCode: 0, stderr: "MemoryError"},
			Result{Stderr: "MemoryError", Status: StatusOK}},
		{"ENOSPC", outcome{exitCode: 1, stderr: "No space left on device"},
			Result{ExitCode: 1, Stderr: "No space left on device", Status: StatusFileLimit}},
		{"OOM kill by the cgroup", outcome{exitCode: 137, oomKilled: true},
			Result{ExitCode: 137, Signal: "SIGKILL", MemoryExceeded: true, Status: StatusMemory}},
		{"OOM kill, then the wall limit", outcome{exitCode: -1, oomKilled: true, killedWall: true},
			Result{ExitCode: -1, Signal: "SIGKILL", MemoryExceeded: true, Status: StatusMemory}},
		{"wall", outcome{exitCode: -1, killedWall: true}, Result{ExitCode: -1, Signal: "SIGKILL", TimedOut: true, Status: StatusTimeout}},
		{"output", outcome{exitCode: -1, killedOutput: true, stdout: "yyy"},
			Result{ExitCode: -1, Signal: "SIGKILL", Stdout: "yyy", OutputTruncated: true, Status: StatusOutputLimit}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := classify(c.o); got != c.want {
				t.Errorf("classify(%+v)\n got %+v\nwant %+v", c.o, got, c.want)
			}
		})
	}
}

func TestCapWriterKeepsWholeCharacters(t *testing.T) {
	for _, c := range []struct {
		name  string
		limit int64
		in    string
		want  string
	}{
		{"ascii at the limit", 3, "abcdef", "abc"},
		{"é cut in two", 2, "aé", "a"},
		{"€ cut after one byte", 2, "a€", "a"},
		{"€ cut after two bytes", 3, "a€", "a"},
		{"€ whole", 4, "a€b", "a€"},
		{"under the limit", 10, "a€", "a€"},
	} {
		t.Run(c.name, func(t *testing.T) {
			full := false
			w := &capWriter{limit: c.limit, full: func() { full = true }}
			w.Write([]byte(c.in))
			if got := w.String(); got != c.want || full != (int64(len(c.in)) > c.limit) {
				t.Fatalf("kept %q (full %v), want %q", got, full, c.want)
			}
		})
	}
}

// bwrap's --disable-userns refuses nested user namespaces by itself, with
// the seccomp filter off: the sandbox's user namespace has used up its
// limit (ENOSPC), so the second wall stands without the first.
func TestUserNamespacesDisabledWithoutSeccomp(t *testing.T) {
	testWithoutSeccomp = true
	defer func() { testWithoutSeccomp = false }()
	r, err := Run(context.Background(), Spec{Command: []string{"sh", "-c", "grep '^Seccomp:' /proc/self/status; unshare -U true && echo UNSHARED"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Stdout != "Seccomp:\t0\n" || !strings.Contains(r.Stderr, "No space left on device") {
		t.Fatalf("got %q (stderr %q), want no filter and unshare refused with ENOSPC", r.Stdout, r.Stderr)
	}
}

// TestFallbackLimits checks exactly what the rlimit fallback promises, on
// every machine: each process at most MemoryBytes of address space, and at
// most Procs processes, so at most MemoryBytes × Procs for the sandbox —
// not MemoryBytes for the sandbox as a whole.
func TestFallbackLimits(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 is not installed under /usr")
	}
	testNoCgroup = true
	defer func() { testNoCgroup = false }()
	if PerSandbox() {
		t.Fatal("the fallback was not forced")
	}
	lim := Limits{MemoryBytes: 256 << 20, Procs: 8, CPUTime: 20 * time.Second, Wall: 60 * time.Second}
	code := `import os, signal
def child(mb):
    pid = os.fork()
    if pid == 0:
        try:
            b = b"\x01" * (mb << 20)
            os._exit(0)
        except MemoryError:
            os._exit(3)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print("100 MiB child:", child(100))
print("300 MiB child:", child(300))
kids = []
try:
    for _ in range(20):
        pid = os.fork()
        if pid == 0:
                        signal.pause()
        kids.append(pid)
except OSError as e:
    print("forks refused after", len(kids), "errno", e.errno)
`
	r, err := Run(context.Background(), Spec{Command: []string{"python3", "-c", code}, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	// Procs counts the sandbox's init and the python parent: 6 children fit.
	want := "100 MiB child: 0\n300 MiB child: 3\nforks refused after 6 errno 11\n"
	if r.Stdout != want {
		t.Fatalf("got %q (status %s, stderr %q), want %q", r.Stdout, r.Status, r.Stderr, want)
	}
}

// Without a cgroup, the first run warns that the limits bind each
// process, saying which are in force and why there is no cgroup.
func TestFallbackWarns(t *testing.T) {
	testNoCgroup = true
	warnOnce = sync.Once{}
	defer func() { testNoCgroup = false }()
	var logs bytes.Buffer
	ctx := zerolog.New(&logs).WithContext(context.Background())
	for range 2 {
		if _, err := Run(ctx, Spec{Command: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}
	want := `{"level":"warn","enforcement":"per process only: rlimits (memory: RLIMIT_AS per process, so up to MemoryBytes × Procs per sandbox; ` +
		`processes: RLIMIT_NPROC; CPU: RLIMIT_CPU per process); no cgroup: turned off by a test",` +
		`"message":"sandbox: limits bind each process, not each sandbox as a whole"}` + "\n"
	if logs.String() != want {
		t.Fatalf("logs:\n%s\nwant once:\n%s", logs.String(), want)
	}
}

func TestCPULimitReachable(t *testing.T) {
	lim := Limits{CPUTime: 1500 * time.Millisecond} // an rlimit of 2 s
	cores := time.Duration(runtime.NumCPU())
	for _, c := range []struct {
		name    string
		elapsed time.Duration
		used    time.Duration
		counted bool
		want    bool
	}{
		{"the group counted the limit", time.Hour, 2 * time.Second, true, true},
		{"the group counted half the limit", time.Hour, time.Second, true, true},
		{"the group counted less than half", time.Hour, 999 * time.Millisecond, true, false},
		{"no group, long enough for the cores", 2 * time.Second / cores, 0, false, true},
		{"no group, too short for the cores", 2*time.Second/cores - time.Nanosecond, 0, false, false},
		{"the group counted it in too short a run", time.Millisecond, 5 * time.Second, true, cores*time.Millisecond >= 2*time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := cpuLimitReachable(lim, c.elapsed, c.used, c.counted); got != c.want {
				t.Errorf("cpuLimitReachable(%v, %v, %v, %v) = %v, want %v", lim.CPUTime, c.elapsed, c.used, c.counted, got, c.want)
			}
		})
	}
}
