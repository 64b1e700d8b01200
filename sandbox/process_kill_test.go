package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rlpipe/rlpipe/internal/testproc"
)

var workerKill = testproc.Helper{Test: "TestWorkerKillHelper", Env: "RLPIPE_SANDBOX_TEST_WORKER_KILL",
	Parent: "TestKillLeavesNoWorker"}

// TestWorkerKillHelper is TestKillLeavesNoWorker's subprocess: as
// "supervise", a child subreaper that starts a "worker" helper, kills it
// with SIGKILL once its sandboxed worker has answered a request, and
// prints what the kill left running; as "worker", it starts a worker
// (cat), has it answer one request, prints "answered" and waits to be
// killed.
func TestWorkerKillHelper(t *testing.T) {
	switch workerKill.Role(t) {
	case "supervise":
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		victim := workerKill.Command("worker")
		out, err := victim.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := victim.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		for sc.Scan() && sc.Text() != "answered" {
		}
		if err := victim.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		victim.Wait()
		left := orphansLeft()
		fmt.Printf("left: %s\n", strings.Join(append(left, "none")[:max(len(left), 1)], ", "))
	case "worker":
		p, err := Start(context.Background(), Spec{Command: []string{"cat"},
			Limits: Limits{Wall: time.Hour, CPUTime: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		if b, err := p.Call(context.Background(), []byte("ping")); err != nil || string(b) != "ping" {
			t.Fatalf("the worker's answer: %q, %v", b, err)
		}
		fmt.Println("answered")
		p.Wait() // until killed
	}
}

// A kill -9 of rlpipe while a worker runs between requests leaves no
// process of the worker's sandbox: Start shares Run's kill-on-exit.
func TestKillLeavesNoWorker(t *testing.T) {
	if !canNewPID() {
		t.Skip("this process may make neither a PID namespace nor a user and a PID namespace, so bwrap runs with only Go's parent-death signal; see docs/REWARDS.md")
	}
	b, err := workerKill.Command("supervise").CombinedOutput()
	if err != nil {
		t.Fatalf("the supervisor: %v\n%s", err, b)
	}
	if !strings.Contains(string(b), "left: none\n") {
		t.Fatalf("the killed worker's sandbox left processes running:\n%s", b)
	}
}
