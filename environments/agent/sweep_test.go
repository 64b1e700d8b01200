package agent_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rlpipe/rlpipe/environments/agent"
	"github.com/rlpipe/rlpipe/internal/testproc"
)

const sweepHelperEnv = "RLPIPE_AGENT_TEST_SWEEP_SCRATCH"

// TestSweepHelper opens an episode workspace in the scratch directory
// $RLPIPE_AGENT_TEST_SWEEP_SCRATCH, prints its root and waits to be killed
// or for stdin to close.
func TestSweepHelper(t *testing.T) {
	dir := testproc.Role(t, sweepHelperEnv, "TestKilledEpisodesAreSwept")
	_, w := newWorld(t)
	ws, err := w.NewWorkspace(context.Background(), &agent.WorkspaceOptions{ScratchDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close() // when stdin closes: a live episode ends normally
	os.Stdout.WriteString("root " + ws.Root() + "\n")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}

func startEpisode(t *testing.T, dir string) (*exec.Cmd, string) {
	t.Helper()
	cmd := testproc.Command("TestSweepHelper", sweepHelperEnv+"="+dir)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if root, ok := strings.CutPrefix(sc.Text(), "root "); ok {
			return cmd, root
		}
	}
	cmd.Wait()
	t.Fatalf("the helper printed no workspace: %s", stderr.String())
	return nil, ""
}

// episodeDir is the workspace directory under dir that holds root.
func episodeDir(dir, root string) string {
	rel, _ := filepath.Rel(dir, root)
	return filepath.Join(dir, strings.Split(rel, string(filepath.Separator))[0])
}

// A process killed mid-episode leaves its workspace — as root, a tmpfs and
// an overlay mounted in it. The next workspace opened in the same scratch
// directory detaches those mounts and removes it, and keeps the workspace
// of an episode still running.
func TestKilledEpisodesAreSwept(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} { // reachable by the sandbox's user
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	dead, deadRoot := startEpisode(t, dir)
	_, liveRoot := startEpisode(t, dir)
	dead.Process.Signal(syscall.SIGKILL)
	dead.Wait()
	deadDir := episodeDir(dir, deadRoot)
	if _, err := os.Stat(filepath.Join(deadRoot, "a.txt")); err != nil {
		t.Fatalf("the killed episode's workspace should be there before the sweep: %v", err)
	}
	_, w := newWorld(t)
	newWorkspace := func() {
		ws, err := w.NewWorkspace(context.Background(), &agent.WorkspaceOptions{ScratchDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		ws.Close()
	}
	newWorkspace()
	if _, err := os.Stat(deadDir); !os.IsNotExist(err) {
		t.Fatalf("%s of the killed episode is still there (%v)", deadDir, err)
	}
	if b, err := os.ReadFile(filepath.Join(liveRoot, "a.txt")); err != nil || string(b) != "alpha\n" {
		t.Fatalf("the live episode's workspace was touched: %q, %v", b, err)
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), deadDir) {
		t.Fatalf("mounts of the killed episode remain:\n%s", mounts)
	}
}
