package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rlpipe/rlpipe/internal/testproc"
)

const setupKillHelperEnv = "RLPIPE_SANDBOX_TEST_SETUP_KILL"

// TestSetupKillHelper is TestKillDuringSetupLeavesNothingRunning's
// subprocess. With "sleep N" it starts a sandbox running sleep N and stops
// in bwrap's setup, the sandbox's init waiting on --block-fd: it prints
// the init's pid and waits to be killed. With "true" it is the next
// start: it runs true.
func TestSetupKillHelper(t *testing.T) {
	what := testproc.Role(t, setupKillHelperEnv, "TestKillDuringSetupLeavesNothingRunning")
	command := []string{"true"}
	if secs, ok := strings.CutPrefix(what, "sleep "); ok {
		command = []string{"sleep", secs}
		testHookInit = func(pid int) {
			fmt.Printf("init %d\n", pid)
			time.Sleep(time.Hour) // until killed
		}
	}
	if _, err := Run(context.Background(), Spec{Command: command,
		Limits: Limits{Wall: time.Hour, CPUTime: time.Hour}}); err != nil {
		t.Fatal(err)
	}
}

// A kill -9 of rlpipe while bwrap sets a sandbox up can leave the
// sandbox running: the init has no parent-death signal yet, and once
// rlpipe is gone its --block-fd reads end-of-file and the setup goes on.
// bwrap starts in the run's cgroup, so that sandbox is in it from its
// first instruction, and the next start kills it: nothing is left.
func TestKillDuringSetupLeavesNothingRunning(t *testing.T) {
	d := groups()
	if d.maker == nil {
		t.Skip("no cgroup bounds a sandbox here (" + Enforcement() + "): a sandbox left by a kill during its setup runs until its CPU limit, see docs/REWARDS.md")
	}
	secs := strconv.Itoa(3600 + os.Getpid()%1000) // a sleep only this test's helper runs
	helper := testproc.Command("TestSetupKillHelper", setupKillHelperEnv+"=sleep "+secs)
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { helper.Process.Kill(); helper.Wait() })
	initPID := 0
	sc := bufio.NewScanner(out)
	for initPID == 0 && sc.Scan() {
		if n, ok := strings.CutPrefix(sc.Text(), "init "); ok {
			initPID, _ = strconv.Atoi(n)
		}
	}
	if initPID == 0 {
		helper.Wait()
		t.Fatalf("the helper ended without starting a sandbox (%v)", helper.ProcessState)
	}
	bwrapPID := parentOf(t, initPID)
	prefix := groupPrefix + strconv.Itoa(helper.Process.Pid) + "-"
	var fds []int
	for _, p := range []int{bwrapPID, initPID} {
		// The helper has done nothing for its group since it started bwrap.
		if g := groupOf(t, d.maker, p); !strings.HasPrefix(g, prefix) {
			t.Fatalf("process %d of the sandbox is in cgroup %q, not in its run's (%s…)", p, g, prefix)
		}
		fd, err := unix.PidfdOpen(p, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		fds = append(fds, fd)
	}

	if err := syscall.Kill(helper.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	helper.Wait()
	next := testproc.Command("TestSetupKillHelper", setupKillHelperEnv+"=true")
	if b, err := next.CombinedOutput(); err != nil {
		t.Fatalf("the next start: %v\n%s", err, b)
	}

	for i, fd := range fds {
		// A hang guard: the next start has killed them before it returned.
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 10_000)
		if err != nil || n != 1 {
			t.Errorf("process %d of the killed run's sandbox is still running after the next start (poll: %d, %v)",
				[]int{bwrapPID, initPID}[i], n, err)
		}
	}
	for _, dir := range d.maker.dirs() {
		if left, _ := filepath.Glob(filepath.Join(dir, prefix+"*")); len(left) > 0 {
			t.Errorf("the killed run's cgroups are left: %v", left)
		}
	}
}

// parentOf returns the parent of the process pid.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // state, ppid, …
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatalf("ppid in %q: %v", s, err)
	}
	return ppid
}

// groupOf returns the name of the process pid's cgroup in the hierarchy
// that m makes groups in (v1: its memory hierarchy).
func groupOf(t *testing.T, m groupMaker, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	key := ""
	if _, ok := m.(v1Maker); ok {
		key = "memory"
	}
	return path.Base(parseOwnCgroups(b)[key])
}
