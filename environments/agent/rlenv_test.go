package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/agent"
	"github.com/rlpipe/rlpipe/environments/envtest"
)

// The agent environment as an episodes stage's rl_env: the world from
// rl_options (relative to the pipeline file), the task from each prompt
// row, and the verifier's outcome in the episode's info.
func TestRLEnv(t *testing.T) {
	dir := greetDir(t)
	cache := t.TempDir()
	env := agent.RLEnv
	for _, c := range []struct {
		name string
		opts any
		want string
	}{
		{"no options", nil, "world is missing: add rl_options: {world: DIR}"},
		{"no world", &agent.PipelineOptions{WorldCache: cache}, "world is missing"},
		{"a world that is not there", &agent.PipelineOptions{World: "nowhere", WorldCache: cache},
			"world " + filepath.Join(dir, "nowhere") + " is not a directory (relative paths are taken from the pipeline file's directory)"},
	} {
		if _, _, err := env.Open(c.opts, dir); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}

	mk, version, err := env.Open(&agent.PipelineOptions{World: "w", WorldCache: cache, TimeoutS: 10}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(version, "sha256:") {
		t.Errorf("version %q, want the world's digest", version)
	}
	// The same world again: the same digest, found in the cache.
	if _, again, err := env.Open(&agent.PipelineOptions{World: filepath.Join(dir, "w"), WorldCache: cache}, "/elsewhere"); err != nil || again != version {
		t.Errorf("the same world by its absolute path: %q, %v; want %q", again, err, version)
	}

	for _, c := range []struct {
		name string
		p    tables.Prompt
		want string
	}{
		{"no verifier", tables.Prompt{PromptID: "p1", Prompt: "do it", Metadata: `{"run": "true"}`},
			"prompt p1: its metadata has no verifier: an agent task needs one"},
		{"metadata that is not a task", tables.Prompt{PromptID: "p2", Prompt: "do it", Metadata: `{"verifier": 3}`},
			"prompt p2: metadata is not an agent task"},
		{"no instruction", tables.Prompt{PromptID: "p3", Metadata: `{"verifier": "true"}`},
			"prompt p3: no instruction: its prompt is empty"},
		{"a protected path the world lacks", tables.Prompt{PromptID: "p4", Prompt: "do it", Metadata: `{"protected": ["tests"], "verifier": "true"}`},
			`protected path "tests": it does not exist in the world`},
	} {
		if _, err := mk(c.p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}

	p := tables.Prompt{PromptID: "greet", Prompt: "Make greet.sh print 'hello world'.",
		Metadata: `{"run": "bash greet.sh", "checks": {"want.txt": "hello world\n"}, ` +
			`"verifier": "cmp -s /candidate/stdout /check/want.txt && printf pass > \"$RLPIPE_VERDICT\""}`}
	e, err := mk(p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := environments.NewRunner(script("```bash\nsed -i 's/wrld/world/' greet.sh\n```"), &environments.RunnerOptions{MaxTurns: 4})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background(), e, environments.Episode{ID: "greet"})
	if err != nil {
		t.Fatal(err)
	}
	tr := res.Trajectory
	if tr.Status != tables.StatusOK || res.Reward != 1 || res.Info["verifier_verdict"] != "pass" {
		t.Fatalf("status %s (%s), reward %v, info %v", tr.Status, deref(tr.Error), res.Reward, res.Info)
	}
	if tr.EnvOutcome == nil || !strings.Contains(*tr.EnvOutcome, `"reward":1`) || !strings.Contains(*tr.EnvOutcome, `"verifier_verdict":"pass"`) {
		t.Errorf("env_outcome %v: want the verifier's verdict", deref(tr.EnvOutcome))
	}
}

// greetDir is a directory holding the world w: a greet.sh that prints
// "hello wrld".
func greetDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "w"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "w", "greet.sh"), []byte("echo hello wrld\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRLEnvSuite runs the agent environment through the environments'
// suite: a player that fixes greet.sh in one tool call, then answers
// without one, which ends the episode.
func TestRLEnvSuite(t *testing.T) {
	dir := greetDir(t)
	envtest.Run(t, envtest.Suite{Env: agent.RLEnv, Dir: dir, MaxSteps: 2,
		Options: &agent.PipelineOptions{World: "w", WorldCache: t.TempDir(), TimeoutS: 10},
		Prompt: tables.Prompt{PromptID: "greet", Prompt: "Make greet.sh print 'hello world'.",
			Metadata: `{"run": "bash greet.sh", "checks": {"want.txt": "hello world\n"}, ` +
				`"verifier": "cmp -s /candidate/stdout /check/want.txt && printf pass > \"$RLPIPE_VERDICT\""}`},
		Player: func() func(string) string {
			turn := 0
			return func(string) string {
				turn++
				if turn == 1 {
					return "```bash\nsed -i 's/wrld/world/' greet.sh\n```"
				}
				return "Done."
			}
		}})
}
