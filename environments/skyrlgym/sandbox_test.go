package skyrlgym_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments/skyrlgym"
)

// In the sandbox: lcb (sandboxed by default: it runs the model's code)
// passes a right program and fails a wrong one; text2sql reads its
// database through the read-only mount of db_path.
func TestSandboxed(t *testing.T) {
	t.Parallel() // a worker of its own: its process starts overlap the others'
	tests, err := json.Marshal([]map[string]any{{"input": "3\n", "output": "6\n", "testtype": "stdin", "metadata": map[string]any{}}})
	if err != nil {
		t.Fatal(err)
	}
	meta, err := json.Marshal(map[string]any{"reward_spec": map[string]any{"ground_truth": string(tests)}})
	if err != nil {
		t.Fatal(err)
	}
	lcb := open(t, skyrlgym.Options{EnvClass: "lcb"}, t.TempDir())
	p := tables.Prompt{PromptID: "double", Prompt: "Read n and print 2n.", Metadata: string(meta)}
	for _, c := range []struct {
		name   string
		action string
		reward float64
	}{
		{"right", "```python\nprint(2 * int(input()))\n```", 1},
		{"wrong", "```python\nprint(int(input()))\n```", 0},
	} {
		t.Run("lcb "+c.name, func(t *testing.T) {
			env, _ := reset(t, lcb, p)
			defer env.End()
			if got, want := play(t, env, c.action), []step{{"", c.reward, true}}; !reflect.DeepEqual(got, want) {
				t.Errorf("steps %+v, want %+v", got, want)
			}
		})
	}

	t.Run("text2sql", func(t *testing.T) {
		dir := t.TempDir()
		makeSpider(t, dir)
		// The sandbox's user (nobody) reads the database.
		for _, d := range []string{filepath.Dir(dir), dir} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		m := open(t, skyrlgym.Options{EnvClass: "text2sql", Sandbox: ptr(true), EnvConfig: map[string]any{"db_path": filepath.Base(dir)}}, filepath.Dir(dir))
		env, _ := reset(t, m, tables.Prompt{PromptID: "sql", Prompt: "q",
			Metadata: `{"db_id": "shop", "data": "spider", "reward_spec": {"ground_truth": "SELECT name FROM items WHERE price > 10"}}`})
		defer env.End()
		got := play(t, env, "<think>filter</think><solution>SELECT name FROM items WHERE price > 10</solution>")
		if want := []step{{"", 1, true}}; !reflect.DeepEqual(got, want) {
			t.Errorf("steps %+v, want %+v", got, want)
		}
	})
}

// In the sandbox, as run directly: a worker that crashes, hangs or
// writes garbage mid-episode makes that episode env_error (or timeout),
// the worker restarts, and the next episode goes on.
func TestSandboxFaults(t *testing.T) {
	t.Parallel() // a worker of its own: its process starts overlap the others'
	m, w := faulty(t, skyrlgym.Options{Sandbox: ptr(true)})
	for _, c := range []struct {
		name, action string
		timeout      time.Duration
		status       string
		error        string
	}{
		{"crash", "crash", 0, tables.StatusEnvError,
			"step 0: skyrl_gym env faulty:Faulty for prompt e: step: the process ended: failed (exit code 3): the skyrl_gym worker ended during this episode's request; it restarts for the next one"},
		{"hang", "hang", time.Second, tables.StatusTimeout, "wall-clock budget of 1s spent during step 0 after 0 turns"},
		{"garbage on the protocol stream", "garbage", 0, tables.StatusEnvError,
			`step 0: skyrl_gym env faulty:Faulty for prompt e: step: the process wrote "garbage" on the protocol stream, not a reply (an environment must print to stdout or stderr, never to the worker's protocol fd): the skyrl_gym worker ended during this episode's request; it restarts for the next one`},
	} {
		t.Run(c.name, func(t *testing.T) {
			starts := w.Starts()
			res := runOne(t, m, "e", c.timeout, c.action)
			if res.Status() != c.status || errorOf(res) != c.error {
				t.Errorf("status %s, error\n%s\nwant %s,\n%s", res.Status(), errorOf(res), c.status, c.error)
			}
			if res := runOne(t, m, "next", 0, "ok"); res.Status() != tables.StatusOK || res.Reward != 1 {
				t.Errorf("the next episode: %s (%s), reward %v; want ok, 1", res.Status(), errorOf(res), res.Reward)
			}
			if got := w.Starts(); got != starts+1 {
				t.Errorf("%d starts, then %d; want one restart", starts, got)
			}
		})
	}
}
