package harbor_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/agent"
	"github.com/rlpipe/rlpipe/environments/harbor"
	"github.com/rlpipe/rlpipe/sandbox/sandboxtest"
)

// TestMain fails the package at once, saying how to install bubblewrap, when
// no sandbox can start here; RLPIPE_SKIP_SANDBOX=1 skips the package instead.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rlpipe-harbor-test-cache-")
	if err != nil {
		panic(err)
	}
	cacheDir = dir
	defer os.RemoveAll(dir)
	sandboxtest.Main(m, "environments/harbor")
}

// cacheDir is the world cache every test shares: each task's world is
// built once per package run.
var cacheDir string

var cacheOnce = sync.OnceValues(func() (*agent.Cache, error) { return agent.NewCache(cacheDir) })

// openTask loads the task in dir and builds its worlds in the shared cache.
func openTask(t *testing.T, dir string) (*harbor.Task, *agent.World, *agent.World) {
	t.Helper()
	task, err := harbor.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := cacheOnce()
	if err != nil {
		t.Fatal(err)
	}
	world, tests, err := task.Worlds(context.Background(), cache)
	if err != nil {
		t.Fatal(err)
	}
	return task, world, tests
}

// play runs one episode of task with the bash blocks of script, then a
// final answer, and returns the last step.
func play(t *testing.T, dir string, script ...string) (environments.Step, error) {
	t.Helper()
	task, world, tests := openTask(t, dir)
	env, err := harbor.NewEnv(task, world, tests, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer env.End()
	ctx := context.Background()
	if _, err := env.Reset(ctx, "ep-1"); err != nil {
		t.Fatal(err)
	}
	for _, s := range script {
		st, err := env.Step(ctx, bash(s))
		if err != nil || st.Done {
			return st, err
		}
	}
	return env.Step(ctx, "done")
}

func bash(s string) string { return "```bash\n" + strings.TrimRight(s, "\n") + "\n```" }

func task(name string) string  { return filepath.Join("testdata", "tasks", name) }
func fault(name string) string { return filepath.Join("testdata", "faults", name) }
