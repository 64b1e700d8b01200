// Command skyrl-gym plays SkyRL-gym's own environments through rlpipe's
// skyrl_gym RL environment: gsm8k_multi_turn on a few arithmetic word
// problems and text2sql on a small SQLite database it makes, each
// episode in the supervised Python worker (environments/skyrlgym), the
// policy a SCRIPTED stand-in (rules, not a model) so that it runs in
// seconds without a GPU. pipeline.yaml is the same environment in a
// training loop with a real policy. See README.md.
//
//	go run ./examples/skyrl-gym -python .venv-py
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/skyrlgym"
	"github.com/rlpipe/rlpipe/policy"
)

type config struct {
	Python  string // a venv or interpreter with skyrl-gym
	Dir     string // where the database is made ("" a temporary directory)
	Samples int    // episodes per problem
}

func main() {
	var cfg config
	flag.StringVar(&cfg.Python, "python", ".venv-py", "a venv directory or an interpreter with skyrl-gym installed")
	flag.StringVar(&cfg.Dir, "dir", "", "where to make the SQLite database (default: a temporary directory)")
	flag.IntVar(&cfg.Samples, "samples", 2, "episodes per problem")
	flag.Parse()
	if _, err := run(context.Background(), cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "skyrl-gym:", err)
		os.Exit(1)
	}
}

// episode is one played episode, as the summary shows it.
type episode struct {
	Env, Prompt string
	Sample      int
	Status      string
	Rewards     []float64
	Reward      float64
}

// problems are gsm8k_multi_turn's rows: a question, its answer, the turn
// budget in the metadata (SkyRL's max_turns column).
var problems = []tables.Prompt{
	{PromptID: "apples", Prompt: "Sam has 12 apples and buys 30 more. How many apples does Sam have?", Answer: "42", Metadata: `{"max_turns": 3}`},
	{PromptID: "pages", Prompt: "A book has 250 pages. Ana read 120. How many pages are left?", Answer: "130", Metadata: `{"max_turns": 3}`},
}

// queries are text2sql's rows, SkyRL's columns in the metadata: the
// database id, its layout (spider) and the gold query.
var queries = []tables.Prompt{
	{PromptID: "pricey", Prompt: "Which items cost more than 10?",
		Metadata: `{"db_id": "shop", "data": "spider", "max_turns": 3, "reward_spec": {"ground_truth": "SELECT name FROM items WHERE price > 10"}}`},
	{PromptID: "cheapest", Prompt: "What is the cheapest item?",
		Metadata: `{"db_id": "shop", "data": "spider", "max_turns": 3, "reward_spec": {"ground_truth": "SELECT name FROM items ORDER BY price LIMIT 1"}}`},
}

// solutions are the queries the stand-in finally submits: right for
// pricey, wrong for cheapest (the priciest item).
var solutions = map[string]string{
	"Which items cost more than 10?": "SELECT name FROM items WHERE price > 10",
	"What is the cheapest item?":     "SELECT name FROM items ORDER BY price DESC LIMIT 1",
}

// mathStandIn answers a word problem: sample 0 thinks aloud first, then
// gives the right answer; sample 1 keeps answering one too many.
func mathStandIn(sample int, answers map[string]string) environments.Scripted {
	return func(msgs []policy.Message) string {
		answer := answers[msgs[0].Content]
		turn := len(msgs) / 2
		switch {
		case sample == 1:
			return fmt.Sprintf("I count again.\n#### %s1", answer)
		case turn == 0:
			return "Let me work it out step by step."
		default:
			return "#### " + answer
		}
	}
}

// sqlStandIn looks at the table, then submits its query.
func sqlStandIn(msgs []policy.Message) string {
	if len(msgs) == 1 {
		return "<think>look at the table</think><sql>SELECT name, price FROM items</sql>"
	}
	return "<think>I know the answer</think><solution>" + solutions[msgs[0].Content] + "</solution>"
}

// run plays every problem's episodes and prints a summary.
func run(ctx context.Context, cfg config, out io.Writer) ([]episode, error) {
	if cfg.Samples < 1 {
		cfg.Samples = 2
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "skyrl-gym-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	if err := makeDatabase(cfg.Python, dir); err != nil {
		return nil, err
	}
	answers := map[string]string{}
	for _, p := range problems {
		answers[p.Prompt] = p.Answer
	}
	var eps []episode
	for _, c := range []struct {
		opts   skyrlgym.Options
		rows   []tables.Prompt
		policy func(sample int) environments.Scripted
	}{
		{skyrlgym.Options{EnvClass: "gsm8k_multi_turn", Python: cfg.Python}, problems,
			func(s int) environments.Scripted { return mathStandIn(s, answers) }},
		{skyrlgym.Options{EnvClass: "text2sql", Python: cfg.Python, EnvConfig: map[string]any{"db_path": dir}}, queries,
			func(int) environments.Scripted { return sqlStandIn }},
	} {
		mk, version, err := skyrlgym.RLEnv.Open(&c.opts, ".")
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "%s (%s)\n", c.opts.EnvClass, version)
		for _, p := range c.rows {
			for s := range cfg.Samples {
				r, err := environments.NewRunner(c.policy(s), &environments.RunnerOptions{MaxTurns: 5})
				if err != nil {
					return nil, err
				}
				env, err := mk(p)
				if err != nil {
					return nil, err
				}
				res, err := r.Run(ctx, env, environments.Episode{ID: p.PromptID, SampleIndex: int32(s)})
				if err != nil {
					return nil, err
				}
				ep := episode{Env: c.opts.EnvClass, Prompt: p.PromptID, Sample: s, Status: res.Status(), Rewards: res.StepRewards, Reward: res.Reward}
				eps = append(eps, ep)
				fmt.Fprintf(out, "  %-9s #%d  %-3s  steps %s  reward %.4g\n", p.PromptID, s, ep.Status, rewardsText(ep.Rewards), ep.Reward)
			}
		}
	}
	fmt.Fprintln(out, "[STAND-IN: a scripted policy, not a model]")
	return eps, nil
}

func rewardsText(rs []float64) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%.4g", r)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// makeDatabase makes dir/spider/database/shop/shop.sqlite, text2sql's
// layout, with the python's sqlite3 (the venv the environments run in).
func makeDatabase(python, dir string) error {
	py, err := interpreter(python)
	if err != nil {
		return err
	}
	db := filepath.Join(dir, "spider", "database", "shop")
	if err := os.MkdirAll(db, 0o755); err != nil {
		return err
	}
	path := filepath.Join(db, "shop.sqlite")
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	cmd := exec.Command(py, "-c", `import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("CREATE TABLE items (name TEXT, price INTEGER)")
c.executemany("INSERT INTO items VALUES (?, ?)", [("lamp", 30), ("book", 12), ("pen", 2)])
c.commit()`, path)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make the shop database with %s: %v: %s", py, err, b)
	}
	return nil
}

// interpreter is the python a venv directory or an interpreter names.
func interpreter(path string) (string, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return filepath.Join(path, "bin", "python"), nil
	} else if err != nil {
		return "", fmt.Errorf("python %s: %w; pass -python with a venv that has skyrl-gym (the project's .venv-py)", path, err)
	}
	return path, nil
}
