package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rlpipe/rlpipe/sandbox"
)

// small are limits that keep each test cheap on a shared machine.
var small = sandbox.Limits{
	CPUTime:     2 * time.Second,
	Wall:        20 * time.Second,
	MemoryBytes: 256 << 20,
	OutputBytes: 64 << 10,
	FileBytes:   8 << 20,
	Procs:       32,
}

// run runs s with small limits where s sets none, and fails on an error.
func run(t *testing.T, s sandbox.Spec) sandbox.Result {
	t.Helper()
	if s.Limits == (sandbox.Limits{}) {
		s.Limits = small
	}
	r, err := sandbox.Run(context.Background(), s)
	if err != nil {
		t.Fatalf("Run(%q): %v", s.Command, err)
	}
	return r
}

// needPython skips a python3 variant when the host has no python3 under
// /usr; each such test has a shell variant that still runs.
func needPython(t *testing.T) {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "/usr/local/bin/python3"} {
		if _, err := os.Stat(p); err == nil {
			return
		}
	}
	t.Skip("python3 is not installed under /usr; the shell variant covers this case")
}

func python(code string) []string { return []string{"python3", "-c", code} }

func TestCheckerPasses(t *testing.T) {
	t.Run("python3", func(t *testing.T) {
		needPython(t)
		r := run(t, sandbox.Spec{
			Command: []string{"python3", "test.py"},
			Files: map[string][]byte{
				"solution.py":      []byte("def square(x):\n    return x * x\n"),
				"test.py":          []byte("from solution import square\nfrom lib.util import N\nassert square(N) == 49\nprint('ok', square(N))\n"),
				"lib/__init__.py":  nil,
				"lib/util.py":      []byte("N = 7\n"),
				"lib/unused/x.txt": []byte("x"),
			},
		})
		if !r.Passed() || r.ExitCode != 0 || r.Stdout != "ok 49\n" {
			t.Fatalf("got %+v, want a pass printing %q", r, "ok 49\n")
		}
	})
	t.Run("sh", func(t *testing.T) {
		r := run(t, sandbox.Spec{
			Command: []string{"sh", "test.sh"},
			Files:   map[string][]byte{"test.sh": []byte("read x\n[ \"$x\" = 42 ] && echo \"got $x\"\n")},
			Stdin:   []byte("42\n"),
		})
		if !r.Passed() || r.Stdout != "got 42\n" {
			t.Fatalf("got %+v, want a pass printing %q", r, "got 42\n")
		}
	})
}

func TestCheckerFails(t *testing.T) {
	t.Run("python3", func(t *testing.T) {
		needPython(t)
		r := run(t, sandbox.Spec{
			Command: []string{"python3", "test.py"},
			Files: map[string][]byte{
				"solution.py": []byte("def square(x):\n    return x + x\n"),
				"test.py":     []byte("from solution import square\nassert square(7) == 49, 'square(7)'\n"),
			},
		})
		if r.Passed() || r.ExitCode == 0 || r.Status != sandbox.StatusFailed || !strings.Contains(r.Stderr, "AssertionError: square(7)") {
			t.Fatalf("got %+v, want a failure with an AssertionError", r)
		}
	})
	t.Run("sh", func(t *testing.T) {
		r := run(t, sandbox.Spec{Command: []string{"sh", "-c", "echo partial; exit 3"}})
		if r.Passed() || r.ExitCode != 3 || r.Status != sandbox.StatusFailed || r.Stdout != "partial\n" {
			t.Fatalf("got %+v, want exit 3 printing %q", r, "partial\n")
		}
	})
	t.Run("missing command", func(t *testing.T) {
		r := run(t, sandbox.Spec{Command: []string{"no-such-command"}})
		if r.Passed() || r.ExitCode == 0 {
			t.Fatalf("got %+v, want a failed result", r)
		}
	})
}

func TestEnvIsOnlyWhatIsGiven(t *testing.T) {
	t.Setenv("RLPIPE_SANDBOX_SECRET", "host-only")
	r := run(t, sandbox.Spec{Command: []string{"env"}, Env: map[string]string{"SEED": "7"}})
	got := strings.Fields(r.Stdout)
	want := []string{"HOME=/work", "LANG=C.UTF-8", "PATH=/usr/local/bin:/usr/bin:/bin", "SEED=7", "PWD=/work"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("env in the sandbox = %q, want %q", got, want)
	}
}

func TestInfiniteLoop(t *testing.T) {
	for _, c := range []struct {
		name    string
		python  bool
		command []string
		limits  sandbox.Limits
	}{
		{"sh busy loop hits the CPU limit", false, []string{"sh", "-c", "while :; do :; done"},
			sandbox.Limits{CPUTime: time.Second, Wall: 30 * time.Second}},
		{"python3 busy loop hits the CPU limit", true, python("while True: pass"),
			sandbox.Limits{CPUTime: time.Second, Wall: 30 * time.Second}},
		{"python3 ignoring SIGXCPU is killed one second later", true,
			python("import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True: pass"),
			sandbox.Limits{CPUTime: time.Second, Wall: 30 * time.Second}},
		{"sleep hits the wall-clock limit", false, []string{"sleep", "600"},
			sandbox.Limits{CPUTime: 10 * time.Second, Wall: 500 * time.Millisecond}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.python {
				needPython(t)
			}
			r := run(t, sandbox.Spec{Command: c.command, Limits: c.limits})
			if !r.TimedOut || r.Status != sandbox.StatusTimeout || r.Passed() {
				t.Fatalf("got %+v, want a timeout", r)
			}
		})
	}
}

// TestForkBomb checks that a fork bomb stops at Limits.Procs: processes are
// refused (not merely killed at a timeout), and none outlives the run. Only
// each run's own PID namespace is counted, so other sandboxes on the
// machine, of other tests or users, do not matter.
func TestForkBomb(t *testing.T) {
	t.Run("sh", func(t *testing.T) {
		r, left := runCounted(t, sandbox.Spec{
			Command: []string{"sh", "-c", "bomb() { bomb | bomb & }; bomb; sleep 1"},
			Limits:  sandbox.Limits{CPUTime: 5 * time.Second, Wall: 20 * time.Second, Procs: 16},
		})
		if !strings.Contains(strings.ToLower(r.Stderr), "fork") {
			t.Fatalf("got %+v, want forks refused", r)
		}
		if len(left) > 0 {
			t.Fatalf("processes of the sandbox outlived it: %v", left)
		}
	})
	t.Run("python3 counts its children", func(t *testing.T) {
		needPython(t)
		const procs = 16
		// The children sleep 30 s: the end of the sandbox's PID namespace
		// must take them down with it.
		r, left := runCounted(t, sandbox.Spec{
			Command: python(`import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError as e:
    print(n, e.errno)
`),
			Limits: sandbox.Limits{CPUTime: 5 * time.Second, Wall: 20 * time.Second, Procs: procs},
		})
		var n, errno int
		if _, err := fmt.Sscan(r.Stdout, &n, &errno); err != nil || !r.Passed() {
			t.Fatalf("got %+v, want a count of children", r)
		}
		if n < 1 || n >= procs || errno != 11 {
			t.Fatalf("forked %d children before errno %d, want 1 to %d before EAGAIN (11)", n, errno, procs-1)
		}
		if len(left) > 0 {
			t.Fatalf("%d children of the sandbox outlived it: %v", len(left), left)
		}
	})
}

// runCounted runs s like run and returns, with its result, the processes
// of the sandbox's own PID namespace that outlived it: those there once
// Run has returned and the namespace's init has exited. The init's exit
// ends the namespace's other processes first (the kernel waits for them),
// so a sandbox that keeps to its namespace leaves none. The namespace is
// held open meanwhile, so its number (what tells its processes) cannot
// pass to a new one.
func runCounted(t *testing.T, s sandbox.Spec) (sandbox.Result, []string) {
	t.Helper()
	var (
		initPID int
		pidfd   = -1
		ns      *os.File
		held    error
	)
	sandbox.OnInit(t, func(pid int) {
		if initPID != 0 {
			return
		}
		initPID = pid
		if pidfd, held = unix.PidfdOpen(pid, 0); held != nil {
			return
		}
		t.Cleanup(func() { unix.Close(pidfd) })
		if ns, held = os.Open(fmt.Sprintf("/proc/%d/ns/pid", pid)); held == nil {
			t.Cleanup(func() { ns.Close() })
		}
	})
	r := run(t, s)
	switch {
	case initPID == 0:
		t.Fatalf("the sandbox's init never started: %+v", r)
	case held != nil:
		t.Fatalf("hold the sandbox's init %d and its PID namespace: %v", initPID, held)
	}
	// A hang guard, not a verdict: Run has already ended the init.
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}, 10_000)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n != 1 {
			t.Fatalf("the sandbox's init %d still runs 10 s after Run returned (poll: %d, %v)", initPID, n, err)
		}
		break
	}
	var own, want unix.Stat_t
	if err := unix.Fstat(int(ns.Fd()), &want); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat("/proc/self/ns/pid", &own); err != nil {
		t.Fatal(err)
	}
	if own.Dev == want.Dev && own.Ino == want.Ino {
		t.Fatalf("the sandbox's init %d is in the test's own PID namespace: the sandbox has none of its own", initPID)
	}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc", d.Name(), "ns", "pid"), &st) != nil || st.Dev != want.Dev || st.Ino != want.Ino {
			continue // exited meanwhile, or in another namespace
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		stat := string(b)
		name := stat[strings.IndexByte(stat, '(')+1 : strings.LastIndexByte(stat, ')')]
		state := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])[0]
		if pid == initPID && state == "Z" {
			continue // the init, exited, waiting for the host's init to reap it
		}
		left = append(left, fmt.Sprintf("%d %s %s", pid, name, state))
	}
	return r, left
}

// TestDiskFill writes "10 GB" and checks that it stops at FileBytes, in the
// sandbox's tmpfs: nothing reaches the host's disk.
func TestDiskFill(t *testing.T) {
	for _, c := range []struct {
		name    string
		python  bool
		command []string
	}{
		{"dd 10 GB into /work", false, []string{"dd", "if=/dev/zero", "of=big", "bs=1M", "count=10240"}},
		{"dd 10 GB into /tmp", false, []string{"dd", "if=/dev/zero", "of=/tmp/big", "bs=1M", "count=10240"}},
		{"dd 10 GB into /dev/shm", false, []string{"dd", "if=/dev/zero", "of=/dev/shm/big", "bs=1M", "count=10240"}},
		{"many files under the size limit", false,
			[]string{"sh", "-c", "i=0; while [ $i -lt 10240 ]; do dd if=/dev/zero of=f$i bs=1M count=1 || exit 1; i=$((i+1)); done"}},
		{"python3 writes 10 GB", true, python("f = open('big', 'wb')\nfor _ in range(10240): f.write(bytes(1 << 20))")},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.python {
				needPython(t)
			}
			r := run(t, sandbox.Spec{Command: c.command})
			if r.Passed() || r.Status != sandbox.StatusFileLimit {
				t.Fatalf("got %+v, want status %s", r, sandbox.StatusFileLimit)
			}
		})
	}
}

func TestNoNetwork(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	port := ln.Addr().(*net.TCPAddr).Port

	for _, c := range []struct {
		name    string
		python  bool
		command []string
	}{
		{"bash to 1.1.1.1:80", false, []string{"bash", "-c", "exec 3<>/dev/tcp/1.1.1.1/80"}},
		{"bash to the host's loopback listener", false, []string{"bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d", port)}},
		{"python3 to 1.1.1.1:80", true, python(`import socket; socket.create_connection(("1.1.1.1", 80), timeout=2)`)},
		{"python3 to the host's loopback listener", true,
			python(fmt.Sprintf(`import socket; socket.create_connection(("127.0.0.1", %d), timeout=2)`, port))},
		{"python3 DNS lookup", true, python(`import socket; socket.getaddrinfo("example.com", 80)`)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.python {
				needPython(t)
			}
			r := run(t, sandbox.Spec{Command: c.command})
			if r.Passed() || r.ExitCode == 0 {
				t.Fatalf("got %+v, want the connection to fail", r)
			}
		})
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the host's listener accepted %d connection(s) from the sandbox", n)
	}
}

// A host directory the sandbox's own /tmp would hide is mounted
// elsewhere, read-only.
func TestReadOnlyMount(t *testing.T) {
	dir := t.TempDir() // under /tmp: a bind at the same path would be hidden
	if err := os.WriteFile(filepath.Join(dir, "data.txt"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(dir), dir} { // reachable by nobody when the tests run as root
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := run(t, sandbox.Spec{Command: []string{"sh", "-c", "cat /mnt-test/dir/data.txt; echo x > /mnt-test/dir/new"},
		ReadOnlyMounts: map[string]string{"/mnt-test/dir": dir}})
	if r.Stdout != "from the host" || !strings.Contains(r.Stderr, "Read-only file system") {
		t.Fatalf("got %+v, want the host file read and the write refused", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
		t.Fatal("the sandbox wrote into the mounted host directory")
	}
}

func TestReadOnlyRoot(t *testing.T) {
	for _, p := range []string{"/usr/rlpipe-sandbox-x", "/etc/rlpipe-sandbox-x", "/rlpipe-sandbox-x", "/bin/rlpipe-sandbox-x", "/dev/rlpipe-sandbox-x"} {
		t.Run(p, func(t *testing.T) {
			r := run(t, sandbox.Spec{Command: []string{"sh", "-c", "echo x > " + p}})
			if r.Passed() || !strings.Contains(r.Stderr, "Read-only file system") {
				t.Fatalf("got %+v, want the write refused as read-only", r)
			}
			if _, err := os.Lstat(p); err == nil {
				t.Fatalf("%s appeared on the host", p)
			}
		})
	}
}

func TestOutputLimit(t *testing.T) {
	for _, c := range []struct {
		name    string
		command []string
		stderr  bool
	}{
		{"stdout forever", []string{"yes"}, false},
		{"stderr forever", []string{"sh", "-c", "yes >&2"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, sandbox.Spec{Command: c.command})
			out := r.Stdout
			if c.stderr {
				out = r.Stderr
			}
			if !r.OutputTruncated || r.Status != sandbox.StatusOutputLimit || int64(len(out)) != small.OutputBytes {
				t.Fatalf("got status %s, truncated %v, %d bytes kept; want %s, true, %d",
					r.Status, r.OutputTruncated, len(out), sandbox.StatusOutputLimit, small.OutputBytes)
			}
			if !strings.HasPrefix(out, "y\ny\n") {
				t.Fatalf("kept output starts %q, want the first bytes", out[:min(len(out), 10)])
			}
		})
	}
}

func TestMemoryHog(t *testing.T) {
	for _, c := range []struct {
		name    string
		python  bool
		command []string
	}{
		{"dd with a 1 GiB buffer", false, []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=1G", "count=1"}},
		{"python3 one 1 GiB allocation", true, python("x = bytearray(1 << 30)")},
		{"python3 growing a list", true, python("l = []\nwhile True: l.append(bytearray(1 << 20))")},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.python {
				needPython(t)
			}
			r := run(t, sandbox.Spec{Command: c.command})
			if !r.MemoryExceeded || r.Status != sandbox.StatusMemory || r.Passed() {
				t.Fatalf("got %+v, want status %s", r, sandbox.StatusMemory)
			}
		})
	}
}

func TestConcurrentRunsHaveSeparateWorkspaces(t *testing.T) {
	const n = 2
	results := make([]sandbox.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = sandbox.Run(context.Background(), sandbox.Spec{
				Command: []string{"sh", "-c", "touch mine-$(cat id) /tmp/mine-$(cat id); sleep 0.5; ls /work /tmp"},
				Files:   map[string][]byte{"id": []byte(strconv.Itoa(i))},
				Limits:  small,
			})
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		want := fmt.Sprintf("/tmp:\nmine-%d\n\n/work:\nid\nmine-%d\n", i, i)
		if got := results[i].Stdout; got != want {
			t.Errorf("run %d sees\n%s\nwant\n%s", i, got, want)
		}
	}
}

// The staging directory of a run's files is gone once Run returns. The
// temporary folder is the test's own: other processes' sandboxes stage
// theirs in the machine's.
func TestWorkspaceIsRemoved(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	run(t, sandbox.Spec{Command: []string{"true"}, Files: map[string][]byte{"a/b": []byte("x")}})
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("staging left behind in %s: %v", tmp, left)
	}
}

func TestInvalidSpec(t *testing.T) {
	ok := []string{"true"}
	// What the error says, for the cases that pin it.
	says := map[string]string{
		"negative CPU time":                "limits: negative CPUTime -1s: invalid sandbox spec",
		"negative wall time":               "limits: negative Wall -1.5s: invalid sandbox spec",
		"negative memory":                  "limits: negative MemoryBytes -1: invalid sandbox spec",
		"negative output":                  "limits: negative OutputBytes -2: invalid sandbox spec",
		"negative file size":               "limits: negative FileBytes -3: invalid sandbox spec",
		"negative procs":                   "limits: negative Procs -4: invalid sandbox spec",
		"mount over /work":                 "read-only mount of /opt/venv: read-only file \"/work/venv\": /work belongs to the sandbox or the host's binds; put it under a directory of its own such as /check: invalid sandbox spec",
		"mount and file share a directory": "read-only mount /python/venv and read-only file /python/worker.py share /python: give each a directory of its own: invalid sandbox spec",
		"mount of a relative host path":    "read-only mount /python/venv: host path \"venv\": want a clean absolute path: invalid sandbox spec",
	}
	for _, c := range []struct {
		name string
		spec sandbox.Spec
	}{
		{"no command", sandbox.Spec{}},
		{"empty program name", sandbox.Spec{Command: []string{""}}},
		{"NUL in an argument", sandbox.Spec{Command: []string{"echo", "a\x00b"}}},
		{"file escaping with ..", sandbox.Spec{Command: ok, Files: map[string][]byte{"../x": nil}}},
		{"absolute file name", sandbox.Spec{Command: ok, Files: map[string][]byte{"/etc/x": nil}}},
		{"unclean file name", sandbox.Spec{Command: ok, Files: map[string][]byte{"a/../b": nil}}},
		{"file named .", sandbox.Spec{Command: ok, Files: map[string][]byte{".": nil}}},
		{"empty file name", sandbox.Spec{Command: ok, Files: map[string][]byte{"": nil}}},
		{"files larger than FileBytes", sandbox.Spec{Command: ok, Files: map[string][]byte{"a": make([]byte, 2048)},
			Limits: sandbox.Limits{FileBytes: 1024}}},
		{"env name with =", sandbox.Spec{Command: ok, Env: map[string]string{"A=B": "c"}}},
		{"empty env name", sandbox.Spec{Command: ok, Env: map[string]string{"": "c"}}},
		{"negative CPU time", sandbox.Spec{Command: ok, Limits: sandbox.Limits{CPUTime: -time.Second}}},
		{"negative wall time", sandbox.Spec{Command: ok, Limits: sandbox.Limits{Wall: -1500 * time.Millisecond}}},
		{"negative memory", sandbox.Spec{Command: ok, Limits: sandbox.Limits{MemoryBytes: -1}}},
		{"negative output", sandbox.Spec{Command: ok, Limits: sandbox.Limits{OutputBytes: -2}}},
		{"negative file size", sandbox.Spec{Command: ok, Limits: sandbox.Limits{FileBytes: -3}}},
		{"negative procs", sandbox.Spec{Command: ok, Limits: sandbox.Limits{Procs: -4}}},
		{"relative bind", sandbox.Spec{Command: ok, ReadOnlyBinds: []string{"opt"}}},
		{"bind of /", sandbox.Spec{Command: ok, ReadOnlyBinds: []string{"/"}}},
		{"bind over /work", sandbox.Spec{Command: ok, ReadOnlyBinds: []string{"/work"}}},
		{"bind into /proc", sandbox.Spec{Command: ok, ReadOnlyBinds: []string{"/proc/1"}}},
		{"mount over /work", sandbox.Spec{Command: ok, ReadOnlyMounts: map[string]string{"/work/venv": "/opt/venv"}}},
		{"mount and file share a directory", sandbox.Spec{Command: ok, ReadOnlyMounts: map[string]string{"/python/venv": "/opt/venv"},
			ReadOnlyFiles: map[string][]byte{"/python/worker.py": nil}}},
		{"mount of a relative host path", sandbox.Spec{Command: ok, ReadOnlyMounts: map[string]string{"/python/venv": "venv"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := sandbox.Run(context.Background(), c.spec)
			if !errors.Is(err, sandbox.ErrInvalid) || errors.Is(err, sandbox.ErrInfra) {
				t.Fatalf("Run = %v, want ErrInvalid (and not ErrInfra)", err)
			}
			if !strings.Contains(err.Error(), says[c.name]) {
				t.Fatalf("Run = %v, want it to say %q", err, says[c.name])
			}
		})
	}
}

func TestInfraFailure(t *testing.T) {
	for _, c := range []struct {
		name string
		spec sandbox.Spec
		want string
	}{
		{"bwrap missing", sandbox.Spec{Command: []string{"true"}, Bwrap: "/nonexistent/bwrap"}, "apt-get install bubblewrap"},
		{"bwrap fails before the sandbox starts", sandbox.Spec{Command: []string{"true"}, Bwrap: "false"}, "bwrap"},
		{"bind of a missing host path", sandbox.Spec{Command: []string{"true"}, ReadOnlyBinds: []string{"/nonexistent/tools"}},
			"/nonexistent/tools"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := sandbox.Run(context.Background(), c.spec)
			if !errors.Is(err, sandbox.ErrInfra) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run = %+v, %v; want ErrInfra mentioning %q", r, err, c.want)
			}
			if r.Status != "" {
				t.Fatalf("an infrastructure failure has no verdict, got status %q", r.Status)
			}
		})
	}
}

func TestCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var r sandbox.Result
	var err error
	go func() {
		defer close(done)
		r, err = sandbox.Run(ctx, sandbox.Spec{Command: []string{"sh", "-c", "echo started; sleep 600"}, Limits: small})
	}()
	time.Sleep(200 * time.Millisecond)
	cancel()
	<-done
	if !errors.Is(err, context.Canceled) || r.Status != sandbox.StatusCanceled {
		t.Fatalf("Run = %+v, %v; want StatusCanceled and context.Canceled", r, err)
	}
}

// A descriptor this process inherited without close-on-exec (as from a
// CI runner) does not reach the code in the sandbox.
func TestInheritedDescriptorsStayOut(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("host only\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(secret, syscall.O_RDONLY, 0) // no O_CLOEXEC: inherited-like
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	script := fmt.Sprintf("if cat /proc/self/fd/%d 2>/dev/null; then echo LEAKED; else echo closed; fi; ls /proc/self/fd | tr '\\n' ' '", fd)
	r := run(t, sandbox.Spec{Command: []string{"sh", "-c", script}})
	if strings.Contains(r.Stdout, "host only") || strings.Contains(r.Stdout, "LEAKED") || !strings.HasPrefix(r.Stdout, "closed") {
		t.Fatalf("fd %d inside the sandbox: %q", fd, r.Stdout)
	}
}

// The kernel's symbols and build configuration read empty in a sandbox:
// bound over with an empty file, each where the host has it.
func TestProcMasked(t *testing.T) {
	for _, p := range []string{"/proc/kallsyms", "/proc/config.gz"} {
		t.Run(filepath.Base(p), func(t *testing.T) {
			b, err := os.ReadFile(p)
			if err != nil || len(b) == 0 {
				t.Skipf("the host has no %s to mask (%d bytes, %v)", p, len(b), err)
			}
			r := run(t, sandbox.Spec{Command: []string{"sh", "-c", "wc -c < " + p + " && cat " + p}})
			if !r.Passed() || r.Stdout != "0\n" {
				t.Fatalf("got %+v, want %s empty in the sandbox (%d bytes on the host)", r, p, len(b))
			}
		})
	}
}

// A program that kills itself reads StatusSignal with the signal's name,
// not StatusTimeout: the limits did not end it. A SIGKILL or SIGXCPU is
// the CPU limit's only when the run could have used that much CPU; the
// wall-clock limit still reads StatusTimeout.
func TestSelfInflictedSignal(t *testing.T) {
	needPython(t)
	lim := sandbox.Limits{CPUTime: 10 * time.Second, Wall: 20 * time.Second}
	for _, c := range []struct {
		name       string
		command    []string
		limits     sandbox.Limits
		wantStatus sandbox.Status
		wantSignal string
		wantExit   int
	}{
		{"kill -9 $$", []string{"sh", "-c", "kill -9 $$"}, lim, sandbox.StatusSignal, "SIGKILL", 137},
		{"raise(SIGSEGV)", python("import signal\nsignal.raise_signal(signal.SIGSEGV)"), lim, sandbox.StatusSignal, "SIGSEGV", 139},
		{"raise(SIGXCPU)", python("import signal\nsignal.raise_signal(signal.SIGXCPU)"), lim, sandbox.StatusSignal, "SIGXCPU", 152},
		{"the wall-clock limit", []string{"sleep", "600"},
			sandbox.Limits{CPUTime: 10 * time.Second, Wall: 300 * time.Millisecond}, sandbox.StatusTimeout, "SIGKILL", -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, sandbox.Spec{Command: c.command, Limits: c.limits})
			if r.Status != c.wantStatus || r.Signal != c.wantSignal || r.ExitCode != c.wantExit || r.TimedOut != (c.wantStatus == sandbox.StatusTimeout) {
				t.Fatalf("got status %q, signal %q, exit %d, timed out %v; want %q, %q, %d (%+v)",
					r.Status, r.Signal, r.ExitCode, r.TimedOut, c.wantStatus, c.wantSignal, c.wantExit, r)
			}
			if v := r.Vars()["status"]; c.wantStatus == sandbox.StatusSignal && v != "signal" {
				t.Errorf("Vars()[status] = %v, want \"signal\"", v)
			}
		})
	}
}
