package skyrlgym_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/envtest"
	"github.com/rlpipe/rlpipe/environments/skyrlgym"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/policy"
	"golang.org/x/sync/errgroup"
)

// The shared environment suite, on a single-turn and a multi-turn env.
func TestRLEnv(t *testing.T) {
	py := python(t)
	for _, c := range []struct {
		name   string
		class  string
		prompt tables.Prompt
		action string
	}{
		{"gsm8k", "gsm8k", tables.Prompt{PromptID: "p", Prompt: "What is 40+2?", Answer: "42"}, "#### 42"},
		{"gsm8k_multi_turn", "gsm8k_multi_turn", tables.Prompt{PromptID: "p", Prompt: "What is 40+2?", Answer: "42",
			Metadata: `{"max_turns": 2}`}, "#### 41"},
	} {
		t.Run(c.name, func(t *testing.T) {
			envtest.Run(t, envtest.Suite{
				Env:     skyrlgym.RLEnv,
				Options: &skyrlgym.Options{EnvClass: c.class, Python: py},
				Prompt:  c.prompt,
				Player:  func() func(string) string { return func(string) string { return c.action } },
			})
		})
	}
}

// gsm8k scores one reply: 1 for the right number after "####" (commas
// stripped), 0 otherwise; the episode ends at once.
func TestGSM8K(t *testing.T) {
	m := open(t, skyrlgym.Options{EnvClass: "gsm8k"}, t.TempDir())
	p := tables.Prompt{PromptID: "q1", Prompt: "What is 1000+42?", Answer: "1042"}
	for _, c := range []struct {
		name, action string
		reward       float64
	}{
		{"right", "So it is 1042.\n#### 1042", 1},
		{"right with a comma", "#### 1,042", 1},
		{"wrong", "#### 1041", 0},
		{"no format", "1042", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			env, obs := reset(t, m, p)
			defer env.End()
			if obs != "What is 1000+42?" {
				t.Errorf("first observation %q, want the prompt", obs)
			}
			got := play(t, env, c.action)
			if want := []step{{"", c.reward, true}}; !reflect.DeepEqual(got, want) {
				t.Errorf("steps %+v, want %+v", got, want)
			}
		})
	}
}

// gsm8k_multi_turn rewards each turn: 0.2/max_turns for a well-formatted
// wrong answer, 0 for none, 1 for the right one (which ends the episode),
// and ends at max_turns. max_turns comes from the row's metadata, or its
// extra_info.
func TestGSM8KMultiTurn(t *testing.T) {
	m := open(t, skyrlgym.Options{EnvClass: "gsm8k_multi_turn"}, t.TempDir())
	const nudge1 = "Please provide your step-by-step reasoning, and also include a tentative numeric answer at the end in the exact format: '#### ANSWER'."
	const nudge2 = "Now provide only the final numeric answer in the exact format: '#### ANSWER'."
	for _, c := range []struct {
		name     string
		metadata string
		actions  []string
		want     []step
	}{
		{"right at the third turn", `{"max_turns": 3}`, []string{"#### 41", "thinking", "#### 42"},
			[]step{{nudge1, 0.2 / 3, false}, {nudge2, 0, false}, {"", 1, true}}},
		{"max_turns from extra_info", `{"extra_info": {"max_turns": 2}}`, []string{"#### 41", "#### 40"},
			[]step{{nudge2, 0.1, false}, {"", 0.1, true}}},
		{"right at once", `{"max_turns": 5}`, []string{"#### 42"}, []step{{"", 1, true}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env, _ := reset(t, m, tables.Prompt{PromptID: "mt", Prompt: "What is 40+2?", Answer: "42", Metadata: c.metadata})
			defer env.End()
			if got := play(t, env, c.actions...); !reflect.DeepEqual(got, c.want) {
				t.Errorf("steps\n%+v\nwant\n%+v", got, c.want)
			}
		})
	}

	// Through the runner: the episode's reward is the sum of its steps'.
	i := 0
	replies := []string{"#### 41", "thinking", "#### 42"}
	r, err := environments.NewRunner(environments.Scripted(func([]policy.Message) string { i++; return replies[i-1] }), &environments.RunnerOptions{MaxTurns: 5})
	if err != nil {
		t.Fatal(err)
	}
	env, err := m(tables.Prompt{PromptID: "mt", Prompt: "What is 40+2?", Answer: "42", Metadata: `{"max_turns": 3}`})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background(), env, environments.Episode{ID: "mt"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status() != tables.StatusOK || !reflect.DeepEqual(res.StepRewards, []float64{0.2 / 3, 0, 1}) || res.Reward != 0.2/3+1 || len(res.Trajectory.Turns) != 6 {
		t.Errorf("status %s, step rewards %v, reward %v, %d turns; want ok, [0.0667 0 1], 1.0667, 6", res.Status(), res.StepRewards, res.Reward, len(res.Trajectory.Turns))
	}
}

// makeSpider makes <dir>/spider/database/shop/shop.sqlite, a table of
// three items.
func makeSpider(t *testing.T, dir string) {
	t.Helper()
	db := filepath.Join(dir, "spider", "database", "shop")
	if err := os.MkdirAll(db, 0o755); err != nil {
		t.Fatal(err)
	}
	pyvenv.Run(t, "make the shop database", nil, python(t), "-c", `import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("CREATE TABLE items (name TEXT, price INTEGER)")
c.executemany("INSERT INTO items VALUES (?, ?)", [("lamp", 30), ("book", 12), ("pen", 2)])
c.commit()`, filepath.Join(db, "shop.sqlite"))
}

// text2sql runs the model's SQL on the row's database and scores the
// final <solution> by its result set; the format is <think> then one
// <solution>, else -1.
func TestText2SQL(t *testing.T) {
	dir := t.TempDir()
	makeSpider(t, dir)
	// db_path relative to the pipeline file's directory.
	m := open(t, skyrlgym.Options{EnvClass: "text2sql", EnvConfig: map[string]any{"db_path": filepath.Base(dir)}}, filepath.Dir(dir))
	p := tables.Prompt{PromptID: "sql1", Prompt: "Which items cost more than 10?",
		Metadata: `{"db_id": "shop", "data": "spider", "reward_spec": {"ground_truth": "SELECT name FROM items WHERE price > 10"}, "max_turns": 3}`}
	// The env shows the rows as a set (int tuples: a fixed order).
	const table = "\n\n<observation> 0\n12\n30\n 2\n<reminder>You have 2 turns left to complete the task.</reminder></observation>\n\n"
	for _, c := range []struct {
		name    string
		actions []string
		want    []step
	}{
		{"look, then the right query", []string{"<think>look</think><sql>SELECT price FROM items</sql>",
			"<think>filter</think><solution>SELECT name FROM items WHERE price > 10</solution>"},
			[]step{{table, 0, false}, {"", 1, true}}},
		{"a wrong query", []string{"<think>guess</think><solution>SELECT name FROM items</solution>"}, []step{{"", 0, true}}},
		{"no think", []string{"<solution>SELECT name FROM items WHERE price > 10</solution>"}, []step{{"", -1, true}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env, obs := reset(t, m, p)
			defer env.End()
			if obs != p.Prompt {
				t.Errorf("first observation %q", obs)
			}
			if got := play(t, env, c.actions...); !reflect.DeepEqual(got, c.want) {
				t.Errorf("steps\n%+v\nwant\n%+v", got, c.want)
			}
		})
	}
}

// Many episodes at once share the worker, their requests in flight
// together on its pipe: each gets its own reply.
func TestConcurrentEpisodes(t *testing.T) {
	m := open(t, skyrlgym.Options{EnvClass: "gsm8k_multi_turn"}, t.TempDir())
	const n = 48
	var g errgroup.Group
	rewards := make([]float64, n)
	for i := range n {
		g.Go(func() error {
			p := tables.Prompt{PromptID: fmt.Sprintf("c%02d", i), Prompt: "q", Answer: strconv.Itoa(i), Metadata: `{"max_turns": 2}`}
			env, err := m(p)
			if err != nil {
				return err
			}
			defer env.End()
			if _, err := env.Reset(context.Background(), p.PromptID); err != nil {
				return err
			}
			// Wrong first (0.1), then right for even i (1) or wrong again (0.1).
			for _, a := range []string{"#### 1000", "#### " + strconv.Itoa(i+i%2)} {
				st, err := env.Step(context.Background(), a)
				if err != nil {
					return err
				}
				rewards[i] += st.Reward
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for i, r := range rewards {
		want := 0.1 + 0.1
		if i%2 == 0 {
			want = 0.1 + 1
		}
		if r != want {
			t.Errorf("episode %d: reward %v, want %v", i, r, want)
		}
	}
}

// A row's extras: its metadata object, and reward_spec from its answer
// when the metadata has none.
func TestExtras(t *testing.T) {
	for _, c := range []struct {
		name string
		p    tables.Prompt
		want map[string]any
	}{
		{"answer", tables.Prompt{Answer: "42"}, map[string]any{"reward_spec": map[string]any{"method": "rule", "ground_truth": "42"}}},
		{"metadata wins", tables.Prompt{Answer: "42", Metadata: `{"reward_spec": {"ground_truth": "SELECT 1"}, "db_id": "shop", "max_turns": 3}`},
			map[string]any{"reward_spec": map[string]any{"ground_truth": "SELECT 1"}, "db_id": "shop", "max_turns": float64(3)}},
		{"nothing", tables.Prompt{Metadata: "{}"}, map[string]any{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := skyrlgym.Extras(c.p)
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Errorf("Extras: %v, %v; want %v", got, err, c.want)
			}
		})
	}
}
