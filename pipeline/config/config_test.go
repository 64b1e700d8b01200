package config_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/config/configtest"
	"github.com/rlpipe/rlpipe/pipeline/standin"
)

const base = configtest.Base

func mustParse(t *testing.T, src string) *config.Config {
	t.Helper()
	return configtest.MustParse(t, src, kinds.Registry())
}

func TestParseValid(t *testing.T) {
	c := mustParse(t, base)
	if c.Run != "exp1" || c.Iterations != 3 || c.BatchSize != 4 || c.Seed != 7 {
		t.Errorf("top level: %+v", c)
	}
	gen := c.Environments["gen"]
	if gen.Retry.Attempts != 3 || gen.Retry.Backoff != 200*time.Millisecond {
		t.Errorf("environments.gen: %+v", gen)
	}
	if g := c.Stages.Generate.Options.(*standin.Stage); g.Sleep != 2*time.Second || g.SamplesPerPrompt != 4 || c.Stages.Generate.Env != "gen" {
		t.Errorf("stages.generate: %+v", c.Stages.Generate)
	}
	// A stage that names no environment gets one named after it.
	if c.Stages.Train.Env != "train" {
		t.Errorf("stages.train.env = %q, want train", c.Stages.Train.Env)
	}
	if _, ok := c.Environments["train"]; !ok {
		t.Errorf("environment train not defaulted: %v", c.Environments)
	}
	p, err := c.Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if p.Run.Name != "exp1" || p.Run.Seed != 7 || !strings.HasPrefix(p.Run.ConfigHash, "sha256:") {
		t.Errorf("run options: %+v", p.Run)
	}
	if p.Loop.Iterations != 3 || p.Loop.BatchSize != 4 || p.Loop.Dataset.Ref != "main" || p.Loop.Dataset.Path != "data/prompts.parquet" {
		t.Errorf("loop: %+v", p.Loop)
	}
	if p.Stages.Generate.Env != "gen" || p.Stages.Sample.Env != "sample" {
		t.Errorf("stage envs: %s %s", p.Stages.Generate.Env, p.Stages.Sample.Env)
	}
}

func TestLoadFiles(t *testing.T) {
	for _, path := range []string{"../../examples/standin/pipeline.yaml", "testdata/command.yaml"} {
		t.Run(path, func(t *testing.T) {
			c, err := config.Load(path, kinds.Registry())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Plan(context.Background()); err != nil {
				t.Fatal(err)
			}
			// The recorded config parses back to the same hash.
			again, b := configtest.Recorded(t, c, kinds.Registry())
			h1, _ := c.Hash()
			h2, _ := again.Hash()
			if !strings.Contains(string(b), "<redacted>") && h1 != h2 {
				t.Errorf("hash changed through YAML(): %s vs %s", h1, h2)
			}
		})
	}
}

func TestCommandStage(t *testing.T) {
	c, err := config.Load("testdata/command.yaml", kinds.Registry())
	if err != nil {
		t.Fatal(err)
	}
	if c.Store != "testdata/store" {
		t.Errorf("store %q: a relative store is taken from the config's directory", c.Store)
	}
	p, err := c.Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g := p.Stages.Generate
	want := "env MODE=fast OPENAI_API_KEY=sk-very-secret python3 gen.py"
	if got := strings.Join(g.Command, " "); !strings.HasPrefix(got, want) {
		t.Errorf("command %q, want prefix %q", got, want)
	}
	if g.Env != "gen" || g.Settings.Timeout != 10*time.Second || len(g.Outputs) != 1 || g.Outputs[0].File != "trajectories.parquet" {
		t.Errorf("generate task: %+v", g)
	}
	if strings.Contains(g.Version, "secret") || !strings.HasPrefix(g.Version, "command-") {
		t.Errorf("version %q", g.Version)
	}
	if p.Loop.InitialPolicy == nil || p.Loop.InitialPolicy.Path != "models/base-adapter" || !p.Loop.InitialPolicy.Dir {
		t.Errorf("initial policy %+v", p.Loop.InitialPolicy)
	}
	if p.Run.Machine == nil || p.Run.Machine.CPU != 2 || p.Run.Machine.MemoryMB != 2048 {
		t.Errorf("machine %+v", p.Run.Machine)
	}

	// The version follows the command, not the secret.
	version := func(src string) string {
		c := mustParse(t, src)
		p, err := c.Plan(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return p.Stages.Generate.Version
	}
	cmd := func(arg, key string) string {
		return strings.Replace(base, "generate: {kind: standin, env: gen, sleep: 2s, samples_per_prompt: 4}",
			`generate: {kind: command, command: [gen, "`+arg+`", "{{outputs.trajectories}}"], outputs: [{name: trajectories}], environment: {HF_TOKEN: `+key+`}}`, 1)
	}
	if version(cmd("a", "k1")) != version(cmd("a", "k2")) {
		t.Error("the version changed with a secret")
	}
	if version(cmd("a", "k1")) == version(cmd("b", "k1")) {
		t.Error("the version did not change with the command")
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // substrings of the error
	}{
		{
			name: "unknown key with hint",
			src:  strings.Replace(base, "    retries: {attempts: 3, backoff: 200ms}", "    retires: {attempts: 3}", 1),
			want: []string{`pipeline.yaml:8:5: unknown key "retires" in environments.gen (did you mean "retries"?)`},
		},
		{
			name: "unknown top-level key",
			src:  base + "iteration: 4\n",
			want: []string{`pipeline.yaml:14:1: unknown key "iteration" at the top level (did you mean "iterations"?)`},
		},
		{
			name: "unknown key without a near one lists the keys",
			src:  strings.Replace(base, "  sample: {kind: standin}", "  sample: {kind: standin, colour: red}", 1),
			want: []string{`pipeline.yaml:10:27: unknown key "colour" in stages.sample (known keys: `, "fail_times"},
		},
		{
			name: "type error",
			src:  strings.Replace(base, "iterations: 3", "iterations: three", 1),
			want: []string{`pipeline.yaml:3:13: iterations: expected an integer, got "three"`},
		},
		{
			name: "bad duration",
			src:  strings.Replace(base, "backoff: 200ms", "backoff: 200", 1),
			want: []string{`pipeline.yaml:8:37: environments.gen.retries.backoff: 200 is not a duration`, `"200ms"`},
		},
		{
			name: "mapping expected",
			src:  strings.Replace(base, "  reward: {kind: standin}", "  reward: standin", 1),
			want: []string{`pipeline.yaml:12:11: stages.reward: expected a mapping, got "standin"`},
		},
		{
			name: "missing dataset",
			src:  strings.Replace(base, "dataset: main:data/prompts.parquet\n", "", 1),
			want: []string{`pipeline.yaml: missing key dataset`},
		},
		{
			name: "dataset not REF:PATH",
			src:  strings.Replace(base, "dataset: main:data/prompts.parquet", "dataset: data/prompts.parquet", 1),
			want: []string{`pipeline.yaml:5:1: dataset: "data/prompts.parquet" is not REF:PATH`},
		},
		{
			name: "stage names an unknown env",
			src:  strings.Replace(base, "env: gen,", "env: gne,", 1),
			want: []string{`pipeline.yaml:11:29: stages.generate.env: environment "gne" is not defined under environments (did you mean "gen"?)`},
		},
		{
			name: "negative staleness",
			src:  base + "overlap: {max_staleness: -1}\n",
			want: []string{`pipeline.yaml:14:11: overlap.max_staleness: must be 0 or more, got -1`},
		},
		{
			name: "missing stage",
			src:  strings.Replace(base, "  reward: {kind: standin}\n", "", 1),
			want: []string{`missing stage reward`},
		},
		{
			name: "unknown kind",
			src:  strings.Replace(base, "  reward: {kind: standin}", "  reward: {kind: python}", 1),
			want: []string{`pipeline.yaml:12:12: stages.reward.kind: unknown kind "python" (` + kinds.Registry().Hint() + `)`},
		},
		{
			name: "command key on a stand-in",
			src:  strings.Replace(base, "  reward: {kind: standin}", "  reward: {kind: standin, command: [x]}", 1),
			want: []string{`pipeline.yaml:12:27: stages.reward.command: only command stages take command`},
		},
		{
			name: "command stage missing an output the loop needs",
			src:  strings.Replace(base, "  train: {kind: standin, sleep: 1s}", `  train: {kind: command, command: [t, "{{outputs.adapter}}"], outputs: [{name: adapter, dir: true}]}`, 1),
			want: []string{`stages.train: the loop needs output "metrics" from the train stage; it is not declared`},
		},
		{
			name: "command stage with an unknown placeholder",
			src:  strings.Replace(base, "  reward: {kind: standin}", `  reward: {kind: command, command: [r, "{{inputs.trajectory}}", "{{outputs.rewards}}"], outputs: [{name: rewards}]}`, 1),
			want: []string{`stages.reward.command[1]: {{inputs.trajectory}}: the reward stage has no input "trajectory"`},
		},
		{
			name: "policy input without an initial policy",
			src:  strings.Replace(base, "  reward: {kind: standin}", `  reward: {kind: standin}`, 1) + "",
			want: nil,
		},
		{
			name: "duplicate key",
			src:  base + "seed: 8\n",
			want: []string{`pipeline.yaml:14:1: mapping key "seed" already defined`},
		},
		{
			name: "syntax error",
			src:  "iterations: [1\n",
			want: []string{`pipeline.yaml:1:`},
		},
		{
			// The YAML library names the value on the line above (1:14).
			name: "a key indented more than the key above it",
			src:  "iterations: 2\nseed: 1\neval:\n  every: 10\n   n: 16\n",
			want: []string{`pipeline.yaml:5:4: key "n" is indented more than the key above it (line it up with the keys of its mapping, or indent it under a key that ends with ':')`},
		},
		{
			// The YAML library names the next key (2:1).
			name: "an unclosed flow mapping",
			src:  "trainer: {lr: 2.0e-3\nseed: 1\n",
			want: []string{`pipeline.yaml:1:10: "{" is not closed before line 2 (',' or '}' must be specified) (end the list or mapping with "}" on its line)`},
		},
		{
			name: "empty file",
			src:  "# nothing\n",
			want: []string{`pipeline.yaml: the file is empty`},
		},
		{
			name: "several documents",
			src:  base + "---\nseed: 1\n",
			want: []string{`several YAML documents`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse("pipeline.yaml", []byte(tt.src), kinds.Registry())
			if tt.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error for:\n%s", tt.src)
			}
			if !errors.Is(err, pipeline.ErrConfig) {
				t.Errorf("error is not pipeline.ErrConfig: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestParseErrorPosition(t *testing.T) {
	src := strings.Replace(base, "    retries: {attempts: 3, backoff: 200ms}", "    retires: {attempts: 3}", 1)
	_, err := config.Parse("pipeline.yaml", []byte(src), kinds.Registry())
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("not a *config.Error: %v", err)
	}
	want := config.Error{File: "pipeline.yaml", Line: 8, Column: 5, Path: "environments.gen.retires", Msg: `unknown key "retires" in environments.gen`, Hint: `did you mean "retries"?`}
	if ce.File != want.File || ce.Line != want.Line || ce.Column != want.Column || ce.Path != want.Path || ce.Msg != want.Msg || ce.Hint != want.Hint {
		t.Errorf("got %+v\nwant %+v", *ce, want)
	}
}

func TestReservedSections(t *testing.T) {
	for _, section := range []string{"reward"} {
		t.Run(section, func(t *testing.T) {
			_, err := config.Parse("pipeline.yaml", []byte(base+section+": {model: x}\n"), kinds.Registry())
			if !errors.Is(err, config.ErrReserved) {
				t.Fatalf("want ErrReserved, got %v", err)
			}
			want := `pipeline.yaml:14:1: section "` + section + `" is not available yet`
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error lacks %q: %v", want, err)
			}
		})
	}
}

func TestPolicyPlaceholderNeedsInitialPolicy(t *testing.T) {
	gen := `generate: {kind: command, command: [g, "{{inputs.policy}}", "{{outputs.trajectories}}"], outputs: [{name: trajectories}]}`
	src := strings.Replace(base, "generate: {kind: standin, env: gen, sleep: 2s, samples_per_prompt: 4}", gen, 1)
	_, err := config.Parse("pipeline.yaml", []byte(src), kinds.Registry())
	if err == nil || !strings.Contains(err.Error(), "set initial_policy") {
		t.Fatalf("want an initial_policy error, got %v", err)
	}
	mustParse(t, src+"initial_policy: main:adapters/base\n")
}

func TestRedaction(t *testing.T) {
	withSecret := func(key, value string) string {
		return strings.Replace(base, "  reward: {kind: standin}",
			`  reward: {kind: command, command: [r, "{{outputs.rewards}}"], outputs: [{name: rewards}], environment: {`+key+`: `+value+`, MODE: strict}}`, 1)
	}
	for _, key := range []string{"JUDGE_API_KEY", "HF_TOKEN", "DB_PASSWORD", "client_secret", "openai_apikey"} {
		t.Run(key, func(t *testing.T) {
			a := mustParse(t, withSecret(key, "hunter2-a"))
			b := mustParse(t, withSecret(key, "hunter2-b"))
			y, err := a.YAML()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(y), "hunter2") {
				t.Errorf("the saved config holds the secret:\n%s", y)
			}
			if !strings.Contains(string(y), key+": <redacted>") || !strings.Contains(string(y), "MODE: strict") {
				t.Errorf("the saved config does not redact %s only:\n%s", key, y)
			}
			ha, _ := a.Hash()
			hb, _ := b.Hash()
			if ha != hb {
				t.Errorf("configs differing only in a secret hash differently: %s %s", ha, hb)
			}
			hc, _ := mustParse(t, strings.Replace(withSecret(key, "hunter2-a"), "MODE: strict", "MODE: lax", 1)).Hash()
			if hc == ha {
				t.Error("configs differing in a plain value hash the same")
			}
		})
	}
}

func TestIsSecret(t *testing.T) {
	for key, want := range map[string]bool{
		"api_key": true, "OPENAI_API_KEY": true, "hf_token": true, "token": true, "GITHUB-TOKEN": true,
		"password": true, "client_secret": true, "max_tokens": false, "num_tokens": false, "judge_url": false, "tokenizer": false,
	} {
		if got := pipeline.IsSecret(key); got != want {
			t.Errorf("IsSecret(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestHashIgnoresFormattingAndRunName(t *testing.T) {
	a := mustParse(t, base)
	reformatted := strings.Replace(base, "run: exp1\n", "# a comment\nrun: exp2\n", 1)
	reformatted = strings.Replace(reformatted, "    retries: {attempts: 3, backoff: 200ms}", "    retries:\n      backoff: 0.2s\n      attempts: 3", 1)
	b := mustParse(t, reformatted)
	ha, _ := a.Hash()
	hb, _ := b.Hash()
	if ha != hb {
		t.Errorf("hash depends on formatting or run name: %s %s", ha, hb)
	}
	c := mustParse(t, strings.Replace(base, "seed: 7", "seed: 8", 1))
	if hc, _ := c.Hash(); hc == ha {
		t.Error("hash ignores the seed")
	}
}
