// Package openenvexample holds the test of the OpenEnv example
// (pipeline.yaml): the environment in arith_env served by rlpipe from
// the real openenv package.
package openenvexample

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/examples/exampletest"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

// pipeline.yaml as shipped, cut to two iterations, the venv found by
// pyvenv: every episode is played on the served environment (its first
// turn the server's "a+b="), ends ok within two answers, and its
// outcome holds the environment's solved flag, which reward.yaml reads.
func TestPipeline(t *testing.T) {
	py := pyvenv.OpenEnv.Python(t, "serve the example's OpenEnv environment")
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	src := exampletest.Config(t, "pipeline.yaml", map[string]string{
		"iterations: 20": "iterations: 2",
		"rl_options: {serve: {app: \"arith_env.server:app\", python: ../../.venv-openenv}}": fmt.Sprintf(
			"rl_options: {serve: {app: \"arith_env.server:app\", python: %q, cwd: %q}}", py, dir),
	})
	e := exampletest.New(t, nil)
	cfg := e.Write("pipeline.yaml", src)
	e.Write("reward.yaml", exampletest.Config(t, "reward.yaml", nil))
	e.Rlpipe("init-store")
	e.Rlpipe("dataset", "arith", "main")
	e.Rlpipe("run", "-f", cfg, "--no-report")

	problem := regexp.MustCompile(`^\d+\+\d+=$`)
	s := e.Open()
	for it := 1; it <= 2; it++ {
		rows := standintest.ReadRows(t, s, "runs-openenv-arith", runs.IterationPath(it, runs.TrajectoriesFile), tables.Trajectories)
		if len(rows) != 64 {
			t.Fatalf("iteration %d: %d episodes, want 8 prompts × 8", it, len(rows))
		}
		for _, r := range rows {
			var first string
			for _, turn := range r.Turns {
				if turn.Role == "user" {
					first = turn.Content
					break
				}
			}
			if r.Status != tables.StatusOK || !problem.MatchString(first) || r.EnvOutcome == nil || !strings.Contains(*r.EnvOutcome, `"solved":`) {
				t.Fatalf("iteration %d: prompt %s: status %s (%v), first observation %q, outcome %v", it, r.PromptID, r.Status, r.Error, first, r.EnvOutcome)
			}
		}
	}
}
