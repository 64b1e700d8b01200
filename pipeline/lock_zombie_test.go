package pipeline

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// A holder on this host that was killed but not yet reaped (a zombie:
// signal 0 still reaches it) no longer holds the run; a running one does.
func TestKilledUnreapedHolderIsNotAlive(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: zombies cannot be told from live processes here")
	}
	host, _ := os.Hostname()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := holder{Host: host, PID: cmd.Process.Pid}
	if !h.alive(time.Minute) {
		t.Fatalf("a running holder (pid %d) is not alive", h.PID)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Not waited for: the process stays a zombie until Wait below. Its
	// state turns Z once the kernel has delivered the kill.
	for deadline := time.Now().Add(30 * time.Second); !zombie(h.PID); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never showed as a zombie in /proc", h.PID)
		}
	}
	if h.alive(time.Minute) {
		t.Errorf("a killed, unreaped holder (pid %d) is alive", h.PID)
	}
	cmd.Wait()
}
