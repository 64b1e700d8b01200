// Package harbor holds the test of the Harbor example: its pipeline.yaml,
// its dataset, and its tasks played through the environment it configures.
package harbor

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/harbor"
	"github.com/rlpipe/rlpipe/examples/exampletest"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/sandbox/sandboxtest"
)

// TestMain fails the package at once, saying how to install bubblewrap, when
// no sandbox can start here; RLPIPE_SKIP_SANDBOX=1 skips the package instead.
func TestMain(m *testing.M) { sandboxtest.Main(m, "examples/harbor") }

// pipeline.yaml validates; `rlpipe dataset harbor` writes one prompt per
// task; each task's solution, the agent's one tool call, scores 1 through
// the rl_options of pipeline.yaml, and doing nothing scores 0.
func TestHarborExample(t *testing.T) {
	c, err := config.Load("pipeline.yaml", kinds.Registry())
	if err != nil {
		t.Fatal(err)
	}
	if c.Stages.Generate == nil {
		t.Fatal("pipeline.yaml: no generate stage")
	}

	e := exampletest.New(t, nil)
	out := filepath.Join(e.Dir, "tasks.parquet")
	e.Rlpipe("dataset", "harbor", "tasks", "--out", out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := tables.Read(bytes.NewReader(b), int64(len(b)), out, tables.Prompts)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.PromptID)
	}
	if got := strings.Join(ids, " "); got != "examples/add-numbers examples/fix-script examples/word-stats" {
		t.Fatalf("prompts %s", got)
	}

	// The environment as pipeline.yaml configures it, its worlds cached in
	// a directory of the test's.
	mk, _, err := harbor.RLEnv.Open(&harbor.PipelineOptions{Tasks: "tasks", TimeoutS: 30, WorldCache: t.TempDir()}, ".")
	if err != nil {
		t.Fatal(err)
	}
	tasks, _, err := harbor.LoadDir("tasks")
	if err != nil {
		t.Fatal(err)
	}
	solutions := map[string]string{}
	for _, tk := range tasks {
		solutions[tk.Instruction] = tk.Solution
	}
	// The oracle replies with the solution whose task's instruction opens
	// the episode, then answers; the nop agent answers at once.
	oracle := environments.Scripted(func(msgs []policy.Message) string {
		if len(msgs) > 1 {
			return "Done."
		}
		for instr, sol := range solutions {
			if strings.HasPrefix(msgs[0].Content, strings.TrimRight(instr, "\n")) {
				return "```bash\n" + strings.TrimSpace(sol) + "\n```"
			}
		}
		return "I do not know this task."
	})
	nop := environments.Scripted(func([]policy.Message) string { return "Nothing to do." })
	for _, row := range rows {
		for _, a := range []struct {
			name   string
			p      policy.Policy
			reward float64
		}{{"oracle", oracle, 1}, {"nop", nop, 0}} {
			env, err := mk(row)
			if err != nil {
				t.Fatal(err)
			}
			r, err := environments.NewRunner(a.p, &environments.RunnerOptions{MaxTurns: 4})
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Run(context.Background(), env, environments.Episode{ID: row.PromptID})
			if err != nil {
				t.Fatal(err)
			}
			if res.Trajectory.Status != tables.StatusOK || res.Reward != a.reward {
				t.Errorf("%s, %s agent: status %s, reward %g, info %v; want ok and %g", row.PromptID, a.name, res.Trajectory.Status, res.Reward, res.Info, a.reward)
			}
		}
	}
}
