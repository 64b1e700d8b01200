package pipeline_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/internal/testproc"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

var sweeper = testproc.Helper{Test: "TestSweepHelper", Env: "RLPIPE_PIPELINE_TEST_SWEEP_WORKDIR", Parent: "TestKilledEnginesWorkDirsAreSwept"}

// TestSweepHelper is an engine in the middle of a task: it opens a run
// with $RLPIPE_PIPELINE_TEST_SWEEP_WORKDIR as WorkDir, starts a command
// task that writes its work directory's path to the file named by its
// first argument and sleeps, and waits to be killed.
func TestSweepHelper(t *testing.T) {
	workDir := sweeper.Role(t)
	r := openRun(t, standintest.NewStore(t, 0), pipeline.RunOptions{WorkDir: workDir})
	task := &pipeline.Task{Name: "long", Command: []string{"sh", "-c", "(pwd; echo $$) > $0.tmp && mv $0.tmp $0 && exec sleep 600",
		os.Getenv(sweeper.Env + "_MARKER")}}
	n := r.Iteration(1).Go(context.Background(), task, pipeline.Call{})
	n.Wait(context.Background()) // killed before it returns
}

// startEngine starts TestSweepHelper and returns it once its task runs,
// with the task's work directory.
func startEngine(t *testing.T, workDir string) (*exec.Cmd, <-chan struct{}, string) {
	t.Helper()
	marker := filepath.Join(t.TempDir(), "workdir")
	cmd := sweeper.Command(workDir, sweeper.Env+"_MARKER="+marker)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the task's sh and sleep are killed with it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	var taskGroup int // the task's command runs in a process group of its own
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if taskGroup > 0 {
			syscall.Kill(-taskGroup, syscall.SIGKILL)
		}
	})
	// Poll for the marker (its appearance is the signal, not a time); the
	// helper's exit ends the wait too.
	for {
		if b, err := os.ReadFile(marker); err == nil {
			dir, pid, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
			taskGroup, _ = strconv.Atoi(pid)
			if !strings.HasPrefix(dir, workDir+"/rlpipe-task-") {
				t.Fatalf("the task ran in %s, not in a task directory of %s", dir, workDir)
			}
			return cmd, exited, dir
		}
		select {
		case <-exited:
			t.Fatalf("the helper exited before its task started")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// An engine killed with SIGKILL runs no deferred cleanup. The next Open
// in the same WorkDir removes its task work directories, and keeps those
// of an engine still running.
func TestKilledEnginesWorkDirsAreSwept(t *testing.T) {
	workDir := t.TempDir()
	dead, deadExited, deadDir := startEngine(t, workDir)
	_, _, liveDir := startEngine(t, workDir)
	if err := syscall.Kill(-dead.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-deadExited
	if _, err := os.Stat(deadDir); err != nil {
		t.Fatalf("the killed engine's work directory should be there before the sweep: %v", err)
	}
	// What an engine killed inside scratch.Mkdir leaves: the directory
	// under its hidden name, empty and unlocked, here a minute old.
	hidden := filepath.Join(workDir, ".rlpipe-task-p"+strconv.Itoa(dead.Process.Pid)+"-12345")
	if err := os.Mkdir(hidden, 0o700); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Minute)
	if err := os.Chtimes(hidden, old, old); err != nil {
		t.Fatal(err)
	}
	openRun(t, standintest.NewStore(t, 0), pipeline.RunOptions{WorkDir: workDir})
	if _, err := os.Stat(hidden); !os.IsNotExist(err) {
		t.Fatalf("the hidden %s of an engine killed in its Mkdir is still there after Open (%v)", hidden, err)
	}
	if _, err := os.Stat(deadDir); !os.IsNotExist(err) {
		t.Fatalf("%s of the killed engine is still there after Open (%v)", deadDir, err)
	}
	if _, err := os.Stat(liveDir); err != nil {
		t.Fatalf("%s of the live engine was removed: %v", liveDir, err)
	}
	left, _ := filepath.Glob(filepath.Join(workDir, "*rlpipe-task-*"))
	if len(left) != 1 || left[0] != liveDir {
		t.Fatalf("work directories left: %v, want only %s", left, liveDir)
	}
}
