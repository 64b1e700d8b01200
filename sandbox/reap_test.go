package sandbox_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rlpipe/rlpipe/sandbox"
)

const reaperHelperEnv = "RLPIPE_SANDBOX_TEST_REAPER"

// TestNoOrphans runs sandboxes from a process that is a child subreaper,
// as PID 1 of a container is: every process orphaned below it becomes its
// child, and a zombie if it never reaps it. After runs that end every way
// — exit, a child that double-forks and outlives the command, the wall
// limit, the output limit, the CPU limit — the process has no children
// left, alive or zombie.
func TestNoOrphans(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestReaperHelper$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), reaperHelperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "children left: none") {
		t.Fatalf("helper output:\n%s", out)
	}
}

// TestReaperHelper is TestNoOrphans's subprocess; it does nothing unless
// started by it.
func TestReaperHelper(t *testing.T) {
	if os.Getenv(reaperHelperEnv) != "1" {
		t.Skip("runs as TestNoOrphans's subprocess")
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		command []string
		limits  sandbox.Limits
	}{
		{"exit", []string{"true"}, small},
		{"double fork", []string{"sh", "-c", "(sleep 60 &) ; (sh -c 'sleep 60 & exit' &); exit 0"}, small},
		{"wall limit", []string{"sh", "-c", "(sleep 60 &); sleep 60"}, sandbox.Limits{Wall: 300 * time.Millisecond}},
		{"output limit", []string{"sh", "-c", "(sleep 60 &); yes"}, small},
		{"CPU limit", []string{"sh", "-c", "(sleep 60 &); while :; do :; done"}, sandbox.Limits{CPUTime: time.Second}},
	} {
		if _, err := sandbox.Run(context.Background(), sandbox.Spec{Command: c.command, Limits: c.limits}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if kids := children(t); len(kids) > 0 {
			t.Fatalf("after %q: children left: %v", c.name, kids)
		}
	}
	t.Log("children left: none")
}

// children lists this process's children with their state ("Z" is a
// zombie).
func children(t *testing.T) []string {
	t.Helper()
	self := strconv.Itoa(os.Getpid())
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []string
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // state, ppid, …
		if len(f) > 1 && f[1] == self {
			out = append(out, filepath.Base(filepath.Dir(p))+" "+s[strings.IndexByte(s, '(')+1:strings.LastIndexByte(s, ')')]+" "+f[0])
		}
	}
	return out
}
