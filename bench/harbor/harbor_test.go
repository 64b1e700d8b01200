// Package harbor_test compares a Harbor task's episode through rlpipe
// (environments/harbor) with Harbor's own trial of it.
package harbor_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/environments/agent"
	"github.com/rlpipe/rlpipe/environments/harbor"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
)

// tasksDir holds the harbor package's test tasks, the ones its parity test
// checks against Harbor.
var tasksDir = filepath.Join("..", "..", "environments", "harbor", "testdata")

// BenchmarkHarborEpisodeVsTrial times a Harbor task's episode, setup and
// verification included, through rlpipe (a copy-on-write workspace of the
// cached world, the solution or nothing as the agent's tool call, test.sh
// in a sandbox of its own) and through Harbor's own trial with a bubblewrap
// environment (testdata/harborpeer: the world built from the Dockerfile in
// each trial, the oracle or nop agent, the verifier, in one Python
// process, so Harbor's start-up is not counted), on add-numbers and
// word-stats, rounds episodes of each agent on each task. It reports
// seconds an episode and harbor/rlpipe; the rewards of both must agree.
// Skipped without .venv-harbor.
func BenchmarkHarborEpisodeVsTrial(b *testing.B) {
	py := pyvenv.Harbor.Python(b, "run Harbor's own trials, the benchmark's peer")
	const rounds = 5
	names := []string{"add-numbers", "word-stats"}
	cache, err := agent.NewCache(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	type opened struct {
		task         *harbor.Task
		world, tests *agent.World
	}
	var tasks []opened
	var dirs []string
	for _, n := range names {
		dir, err := filepath.Abs(filepath.Join(tasksDir, "tasks", n))
		if err != nil {
			b.Fatal(err)
		}
		tk, err := harbor.Load(dir)
		if err != nil {
			b.Fatal(err)
		}
		w, tw, err := tk.Worlds(ctx, cache) // built once: each episode copies it
		if err != nil {
			b.Fatal(err)
		}
		tasks = append(tasks, opened{tk, w, tw})
		dirs = append(dirs, dir)
	}
	episode := func(o opened, solve bool) float64 {
		env, err := harbor.NewEnv(o.task, o.world, o.tests, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := env.Reset(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
		if solve {
			if _, err := env.Step(ctx, "```bash\n"+strings.TrimSpace(o.task.Solution)+"\n```"); err != nil {
				b.Fatal(err)
			}
		}
		st, err := env.Step(ctx, "done")
		if err != nil {
			b.Fatal(err)
		}
		return st.Reward
	}
	for b.Loop() {
		perAgent := map[string]float64{}
		for _, agentName := range []string{"oracle", "nop"} {
			start := time.Now()
			for range rounds {
				for _, o := range tasks {
					want := map[string]float64{"oracle": 1, "nop": 0}[agentName]
					if r := episode(o, agentName == "oracle"); r != want {
						b.Fatalf("%s, %s: reward %g, want %g", o.task.Name, agentName, r, want)
					}
				}
			}
			perAgent[agentName] = time.Since(start).Seconds() / float64(rounds*len(tasks))
		}
		args := append([]string{filepath.Join(tasksDir, "harborpeer", "peer.py"), filepath.Join(b.TempDir(), "trials"), strconv.Itoa(rounds)}, dirs...)
		out := pyvenv.Run(b, "harborpeer/peer.py", nil, py, args...)
		var peer struct {
			Tasks   map[string]map[string]map[string]float64 `json:"tasks"`
			Seconds map[string]float64                       `json:"seconds"`
		}
		if err := json.Unmarshal(out, &peer); err != nil {
			b.Fatalf("peer.py printed %q: %v", out, err)
		}
		for dir, byAgent := range peer.Tasks {
			for agentName, comps := range byAgent {
				for k, v := range comps {
					if want := map[string]float64{"oracle": 1, "nop": 0}[agentName]; v != want {
						b.Fatalf("Harbor's trial of %s, %s: %s = %g, want %g", dir, agentName, k, v, want)
					}
				}
			}
		}
		for _, agentName := range []string{"oracle", "nop"} {
			theirs := peer.Seconds[agentName] / float64(rounds*len(tasks))
			ours := perAgent[agentName]
			b.ReportMetric(ours, agentName+"_rlpipe_s/episode")
			b.ReportMetric(theirs, agentName+"_harbor_s/trial")
			b.ReportMetric(theirs/ours, agentName+"_harbor/rlpipe")
			b.Logf("%s: rlpipe %.3f s an episode, Harbor's trial %.3f s: harbor/rlpipe %.1f", agentName, ours, theirs, theirs/ours)
		}
	}
}
