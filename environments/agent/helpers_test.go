package agent_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/environments/agent"
	"github.com/rlpipe/rlpipe/sandbox"
)

var worldFiles = map[string][]byte{
	"a.txt":     []byte("alpha\n"),
	"b.txt":     []byte("beta\n"),
	"dir/c.txt": []byte("gamma\n"),
}

// newWorld builds the test world in a fresh cache.
func newWorld(t testing.TB) (*agent.Cache, *agent.World) {
	t.Helper()
	return cachedWorld(t, agent.WorldSpec{Name: "abc", Files: worldFiles})
}

// cachedWorld builds spec in a fresh cache, or fails t.
func cachedWorld(t testing.TB, spec agent.WorldSpec) (*agent.Cache, *agent.World) {
	t.Helper()
	c, err := agent.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.World(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

func newWorkspace(t testing.TB, w *agent.World, mode agent.Mode) *agent.Workspace {
	t.Helper()
	ws, err := w.NewWorkspace(context.Background(), &agent.WorkspaceOptions{Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	if mode == agent.ModeAuto && os.Geteuid() == 0 && ws.Mode() != agent.ModeOverlay {
		t.Fatalf("running as root, ModeAuto gave %s: %s", ws.Mode(), ws.Fallback())
	}
	return ws
}

func run(t testing.TB, ws *agent.Workspace, script string) sandbox.Result {
	t.Helper()
	r, err := ws.Run(context.Background(), script, sandbox.Limits{})
	if err != nil {
		t.Fatalf("run %q: %v", script, err)
	}
	return r
}

func digest(t testing.TB, dir string) string {
	t.Helper()
	d, err := agent.TreeDigest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// mounted reports whether a mount point under prefix is in this process's
// mount table.
func mounted(t testing.TB, prefix string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], prefix) {
			return true
		}
	}
	return false
}

var modes = []agent.Mode{agent.ModeAuto, agent.ModeCopy}

func modeName(m agent.Mode) string {
	if m == agent.ModeAuto {
		return "auto"
	}
	return string(m)
}
