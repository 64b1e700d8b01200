package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/rlpipe/rlpipe/internal/testproc"
)

var setupKill = testproc.Helper{Test: "TestSetupKillHelper", Env: "RLPIPE_SANDBOX_TEST_SETUP_KILL",
	Parent: "TestKillDuringSetupLeavesNothingRunning"}

// TestSetupKillHelper is TestKillDuringSetupLeavesNothingRunning's
// subprocess, in one of four roles:
//
//   - "supervise N": the trials' parent, a child subreaper: every process
//     orphaned below it becomes its child, so it sees what a killed run
//     leaves without looking at any other process of the host. It runs N
//     trials and prints a line per trial;
//   - "run": prints "start" and runs a sandbox of `sleep 3600`;
//   - "at-init": the same, but stops in bwrap's setup, the sandbox's
//     init waiting on --block-fd, prints "init" and waits to be killed;
//   - "next": a next start, which sweeps the killed runs' cgroups.
func TestSetupKillHelper(t *testing.T) {
	role := setupKill.Role(t)
	forcedPIDNS()
	if n, ok := strings.CutPrefix(role, "supervise "); ok {
		trials, err := strconv.Atoi(n)
		if err != nil {
			t.Fatal(err)
		}
		superviseSetupKills(t, trials)
		return
	}
	if role == "next" {
		return // TestMain's first run has swept the killed runs' groups
	}
	if role == "at-init" {
		testHookInit = func(int) {
			fmt.Println("init")
			time.Sleep(time.Hour) // until killed
		}
	}
	fmt.Println("start")
	if _, err := Run(context.Background(), Spec{Command: []string{"sleep", "3600"},
		Limits: Limits{Wall: time.Hour, CPUTime: time.Hour}}); err != nil {
		t.Fatal(err)
	}
}

// superviseSetupKills runs trials runs, each killed (SIGKILL) during or
// just after its sandbox's setup: every other one while the sandbox's
// init waits on --block-fd, the others at a random moment from 0 to 60 ms
// after Run is called (a fixed seed). After each it waits for every
// process left below it to end and prints "trial N (how): left none" or
// what was left, which it then kills.
func superviseSetupKills(t *testing.T, trials int) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(35, 6))
	var victims []int
	for i := range trials {
		role, wait, how := "at-init", "init", "at --block-fd"
		var delay time.Duration
		if i%2 == 1 {
			role, wait = "run", "start"
			delay = time.Duration(rng.Int64N(int64(60 * time.Millisecond)))
			how = fmt.Sprintf("%.1f ms into Run", delay.Seconds()*1000)
		}
		victim := setupKill.Command(role)
		out, err := victim.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := victim.Start(); err != nil {
			t.Fatal(err)
		}
		victims = append(victims, victim.Process.Pid)
		sc := bufio.NewScanner(out)
		for sc.Scan() && sc.Text() != wait {
		}
		time.Sleep(delay) // where the kill lands, not a verdict
		if err := victim.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		victim.Wait()
		left := orphansLeft()
		fmt.Printf("trial %d (%s): left %s\n", i+1, how, strings.Join(append(left, "none")[:max(len(left), 1)], ", "))
	}
	// The next start removes the killed runs' cgroups.
	next := setupKill.Command("next")
	if b, err := next.CombinedOutput(); err != nil {
		t.Fatalf("the next start: %v\n%s", err, b)
	}
	if d := groups(); d.maker != nil {
		for _, pid := range victims {
			for _, dir := range d.maker.dirs() {
				if left, _ := filepath.Glob(filepath.Join(dir, groupPrefix+strconv.Itoa(pid)+"-*")); len(left) > 0 {
					fmt.Printf("cgroups left: %v\n", left)
				}
			}
		}
	}
}

// orphansLeft reaps this subreaper's exited children and returns those
// still running after 10 s (a hang guard: a sandbox that outlived its run
// sleeps for an hour), as "pid name", killed.
func orphansLeft() []string {
	deadline := time.Now().Add(10 * time.Second)
	for {
		for {
			var ws unix.WaitStatus
			if pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
		kids := liveChildren()
		if len(kids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var left []string
			for _, pid := range kids {
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
				left = append(left, fmt.Sprintf("%d %s", pid, strings.TrimSpace(string(comm))))
				_ = unix.Kill(pid, unix.SIGKILL)
			}
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// liveChildren lists this process's children that have not exited, from
// every thread's children (an orphan goes to any thread of its reaper).
func liveChildren() []int {
	var pids []int
	lists, _ := filepath.Glob("/proc/self/task/*/children")
	for _, l := range lists {
		b, _ := os.ReadFile(l)
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			stat, err := os.ReadFile("/proc/" + f + "/stat")
			if err != nil {
				continue
			}
			s := string(stat)
			if st := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(st) > 0 && st[0] != "Z" {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// A kill -9 of rlpipe while bwrap sets a sandbox up must leave nothing
// running: bubblewrap arms the sandbox init's parent-death signal only
// after the setup, which goes on without rlpipe, so a kill then once left
// the sandbox running (about 1 in 45). bwrap now runs as the init of a
// PID namespace of its own (see pidNamespace in sandbox.go), so whenever
// the kill lands, bwrap and everything of the sandbox end with it.
//
// The trials (RLPIPE_CHAOS_TRIALS, default 6) run under a subreaper
// helper, which sees exactly the processes its killed runs leave, and
// the next start removes their cgroups.
func TestKillDuringSetupLeavesNothingRunning(t *testing.T) {
	if !canNewPID() {
		t.Skip("this process may make neither a PID namespace nor a user and a PID namespace, so bwrap runs without one of its own: a kill during setup can leave the sandbox running, see docs/REWARDS.md")
	}
	trials := testproc.ChaosTrials(t, 6)
	b, err := setupKill.Command("supervise " + strconv.Itoa(trials)).CombinedOutput()
	if err != nil {
		t.Fatalf("the supervisor: %v\n%s", err, b)
	}
	checkTrials(t, string(b), trials)
}

// checkTrials fails t for each trial line of superviseSetupKills' output
// out that names a process left running, and for cgroups left, and when
// out has not trials trial lines.
func checkTrials(t *testing.T, out string, trials int) {
	t.Helper()
	n := 0
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "trial "):
			n++
			if !strings.HasSuffix(line, ": left none") {
				t.Errorf("%s", line)
			}
		case strings.HasPrefix(line, "cgroups left: "):
			t.Errorf("the killed runs' %s", line)
		}
	}
	if n != trials {
		t.Fatalf("%d trials reported, want %d:\n%s", n, trials, out)
	}
	t.Logf("%d kills during setup, nothing left running:\n%s", trials, out)
}

// Where bwrap cannot have a PID namespace of its own (neither may be
// made), it starts as before, with Go's parent-death signal, and runs
// sandboxes alike: the same results, and the init's pid (reported by
// bwrap in this process's numbering then) held.
func TestWithoutOwnPIDNamespace(t *testing.T) {
	forcePIDNS(t, pidNSNone)
	if a := bwrapAttr(); a.Cloneflags != 0 || a.Pdeathsig != unix.SIGKILL {
		t.Fatalf("bwrap's attributes %+v, want no new namespace and a parent-death signal", a)
	}
	runEachWay(t)
}

// Where a plain PID namespace is refused (not root, or no CAP_SYS_ADMIN)
// bwrap starts in a user and a PID namespace of its own, and runs
// sandboxes alike. Forced here as root; TestUnprivilegedSandbox runs it
// as nobody, where the probe chooses it.
func TestUserAndPIDNamespace(t *testing.T) {
	probe := exec.Command("/bin/true")
	probe.SysProcAttr = pidNSAttr(pidNSUser)
	if err := probe.Run(); err != nil {
		t.Skipf("this process may not make a user and a PID namespace: %v", err)
	}
	forcePIDNS(t, pidNSUser)
	want := uint32(unix.CLONE_NEWUSER | unix.CLONE_NEWPID)
	if a := bwrapAttr(); uint32(a.Cloneflags) != want || a.Pdeathsig != 0 || len(a.UidMappings) != 1 || len(a.GidMappings) != 1 {
		t.Fatalf("bwrap's attributes %+v, want a new user and PID namespace with one uid and one gid mapped", a)
	}
	runEachWay(t)
}

// forcePIDNS makes bwrap start by way m until t ends.
func forcePIDNS(t *testing.T, m pidNS) {
	testPIDNS = &m
	t.Cleanup(func() { testPIDNS = nil })
}

// runEachWay runs sandboxes that end each way and checks their results,
// and that the init's pid Run holds is bwrap's child.
func runEachWay(t *testing.T) {
	for _, c := range []struct {
		name    string
		command []string
		limits  Limits
		status  Status
		exit    int
		stdout  string
	}{
		{"exit 0", []string{"echo", "hello"}, Limits{}, StatusOK, 0, "hello\n"},
		{"exit 3", []string{"sh", "-c", "exit 3"}, Limits{}, StatusFailed, 3, ""},
		{"kill -9 $$", []string{"sh", "-c", "kill -9 $$"}, Limits{}, StatusSignal, 137, ""},
		{"the wall-clock limit", []string{"sleep", "600"}, Limits{Wall: 300 * time.Millisecond}, StatusTimeout, -1, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			inits := 0
			testHookInit = func(pid int) {
				if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && string(b) == "bwrap\n" {
					inits++
				}
			}
			defer func() { testHookInit = nil }()
			r, err := Run(context.Background(), Spec{Command: c.command, Limits: c.limits})
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != c.status || r.ExitCode != c.exit || r.Stdout != c.stdout || inits != 1 {
				t.Fatalf("got %+v with %d init(s) seen as bwrap, want status %s, exit %d, stdout %q and the init", r, inits, c.status, c.exit, c.stdout)
			}
		})
	}
}

// Without a PID namespace for bwrap, the first Run warns, once, that a
// kill during setup can leave a sandbox running, and why none could be
// made.
func TestWithoutOwnPIDNamespaceWarnsOnce(t *testing.T) {
	forcePIDNS(t, pidNSNone)
	why := pidNSWhy
	pidNSWhy = "a PID namespace: operation not permitted; a user and a PID namespace: operation not permitted"
	pidWarnOnce = sync.Once{}
	t.Cleanup(func() { pidNSWhy = why })
	var buf bytes.Buffer
	ctx := zerolog.New(&buf).WithContext(context.Background())
	for range 2 {
		if _, err := Run(ctx, Spec{Command: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.Contains(line, "PID namespace") {
			got = append(got, line)
		}
	}
	want := `{"level":"warn","why":"a PID namespace: operation not permitted; a user and a PID namespace: operation not permitted",` +
		`"message":"sandbox: no PID namespace for bwrap, so a kill of rlpipe during a sandbox's setup can leave it running (docs/REWARDS.md)"}`
	if len(got) != 1 || got[0] != want {
		t.Fatalf("logged %q, want once %s", got, want)
	}
}
