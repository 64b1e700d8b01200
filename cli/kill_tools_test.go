package cli

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/sandbox"
)

// TestKillToolEpisodesAndResume SIGKILLs `rlpipe run` of the tools demo
// (examples/tools-demo: tiny-tool's tool calls in copy-on-write
// bubblewrap worlds, each task's files written into its workspace, a
// verifier in a sandbox of its own) at random moments and runs it again
// until it finishes: every table and adapter equals an uninterrupted
// run's, byte for byte, so no episode is lost or played twice.
func TestKillToolEpisodesAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the tools demo's loop several times")
	}
	if err := sandbox.Available(); err != nil {
		t.Skipf("needs a working bubblewrap sandbox (`make deps`): %v", err)
	}
	world := filepath.Join(t.TempDir(), "world")
	if err := os.MkdirAll(world, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(world, "README"), []byte("the tools demo's world\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var tasks strings.Builder
	for _, p := range [][2]int{{7, 5}, {2, 3}, {9, 9}, {0, 4}} {
		task := map[string]any{"id": fmt.Sprintf("sum-%d-%d", p[0], p[1]), "instruction": "Sum input.txt into answer.txt.",
			"files":    map[string]string{"input.txt": fmt.Sprintf("%d %d", p[0], p[1])},
			"checks":   map[string]string{"answer.txt": fmt.Sprint(p[0] + p[1])},
			"verifier": `test -f answer.txt && test "$(tr -d ' \n' < answer.txt)" = "$(cat /check/answer.txt)"`}
		b, err := json.Marshal(task)
		if err != nil {
			t.Fatal(err)
		}
		tasks.Write(append(b, '\n'))
	}
	src := readFile(t, "../examples/tools-demo/pipeline.yaml")
	eval, envs := strings.Index(src, "eval:"), strings.Index(src, "environments:")
	if eval < 0 || envs < eval {
		t.Fatal("examples/tools-demo/pipeline.yaml no longer has its eval section before environments; update this test")
	}
	src = src[:eval] + src[envs:]
	for old, new := range map[string]string{"iterations: 30": "iterations: 4", "batch_size: 8": "batch_size: 2", "episodes: 8": "episodes: 4",
		"rl_options: {world: world,": "rl_options: {world: " + world + ", world_cache: " + filepath.Join(t.TempDir(), "worlds") + ","} {
		if !strings.Contains(src, old) {
			t.Fatalf("examples/tools-demo/pipeline.yaml has no %q; update this test", old)
		}
		src = strings.Replace(src, old, new, 1)
	}
	setup := func() (*harness, string) {
		h := newStore(t)
		h.ok("dataset", "import", h.file("tasks.jsonl", tasks.String()), "main:data/sum-train.parquet", "--id", "id", "--question", "instruction", "--no-answer")
		h.file("reward.yaml", readFile(t, "../examples/tools-demo/reward.yaml"))
		return h, h.file("pipeline.yaml", src)
	}
	killedRunMatches(t, setup, "runs-tools", 20, rand.New(rand.NewPCG(7, 38)), 300, 1500)
}
