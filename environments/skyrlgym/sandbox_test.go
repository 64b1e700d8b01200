package skyrlgym_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

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
