package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/internal/testproc"
	"github.com/rlpipe/rlpipe/sandbox"
)

const sweepHelperEnv = "RLPIPE_SANDBOX_TEST_SWEEP"

// TestSweepHelper runs one sandbox with $TMPDIR as the temporary folder:
// "sleep" sleeps until killed, "true" returns at once.
func TestSweepHelper(t *testing.T) {
	what := testproc.Role(t, sweepHelperEnv, "TestKilledRunsStagingIsSwept")
	command := []string{"true"}
	if secs, ok := strings.CutPrefix(what, "sleep "); ok {
		command = []string{"sleep", secs}
	}
	if _, err := sandbox.Run(context.Background(), sandbox.Spec{Command: command, Files: map[string][]byte{"a": []byte("x")},
		Limits: sandbox.Limits{Wall: time.Hour, CPUTime: time.Hour}}); err != nil {
		t.Fatal(err)
	}
}

// helper starts TestSweepHelper in a process group of its own.
func sweepHelper(t *testing.T, tmp, what string) *exec.Cmd {
	t.Helper()
	cmd := testproc.Command("TestSweepHelper", sweepHelperEnv+"="+what, "TMPDIR="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	return cmd
}

// staging waits until the helper's sandboxed "sleep secs" runs — killing
// the helper while bwrap sets up can leave that sandbox running, see the
// threat model in docs/REWARDS.md — and tmp holds n staging directories
// of the helpers' sleeping runs (those holding the file "a"; TestMain's
// run has none); it returns them.
func staging(t *testing.T, tmp string, helper *exec.Cmd, secs string, n int) []string {
	t.Helper()
	for !runningBelow(helper.Process.Pid, "sleep\x00"+secs+"\x00") {
		time.Sleep(20 * time.Millisecond) // waiting for the helper to start, not a verdict
	}
	for {
		dirs, _ := filepath.Glob(filepath.Join(tmp, "rlpipe-sandbox-*", "a"))
		if len(dirs) >= n {
			for i := range dirs {
				dirs[i] = filepath.Dir(dirs[i])
			}
			return dirs
		}
		time.Sleep(20 * time.Millisecond) // waiting for the helper to start, not a verdict
	}
}

// runningBelow reports whether a process that descends from the process
// root has exactly this command line: the same sleep of another test's
// sandbox on the machine does not count.
func runningBelow(root int, cmdline string) bool {
	all, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range all {
		if b, err := os.ReadFile(p); err != nil || string(b) != cmdline {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		for pid > 1 {
			if pid = parent(pid); pid == root {
				return true
			}
		}
	}
	return false
}

// parent returns the parent of the process pid, 0 once it has exited.
func parent(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // state, ppid, …
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// A process killed during a run leaves its staging directory; the next
// process's first run removes it, and keeps the one of a run still going.
func TestKilledRunsStagingIsSwept(t *testing.T) {
	tmp := t.TempDir()
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	// The live run first: each start sweeps the dead.
	live := fmt.Sprint(600 + os.Getpid()%1000) // sleep lengths only these helpers use
	gone := fmt.Sprint(1600 + os.Getpid()%1000)
	liveHelper := sweepHelper(t, tmp, "sleep "+live)
	liveDir := staging(t, tmp, liveHelper, live, 1)[0]
	dead := sweepHelper(t, tmp, "sleep "+gone)
	var deadDir string
	for _, d := range staging(t, tmp, dead, gone, 2) {
		if d != liveDir {
			deadDir = d
		}
	}
	syscall.Kill(-dead.Process.Pid, syscall.SIGKILL)
	dead.Wait()
	if _, err := os.Stat(deadDir); err != nil {
		t.Fatalf("the killed run's staging should be there before the sweep: %v", err)
	}
	next := testproc.Command("TestSweepHelper", sweepHelperEnv+"=true", "TMPDIR="+tmp)
	if out, err := next.CombinedOutput(); err != nil {
		t.Fatalf("a new start: %v\n%s", err, out)
	}
	if _, err := os.Stat(deadDir); !os.IsNotExist(err) {
		t.Fatalf("%s of the killed run is still there (%v)", deadDir, err)
	}
	if _, err := os.Stat(liveDir); err != nil {
		t.Fatalf("%s of the live run was removed: %v", liveDir, err)
	}
}
