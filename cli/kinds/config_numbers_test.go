package kinds_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/trainers/embedded"
	"github.com/rlpipe/rlpipe/trainers/external"
)

// numbersBase is a pipeline whose trainer.lr (a float), batch_size (an
// integer), eval (a float and integers) and a stage's version (a string)
// the cases below replace.
const numbersBase = `dataset: main:data/p.parquet
iterations: 1
batch_size: BATCH
policy: {kind: embedded, model: tiny-arith}
trainer: {lr: LR}
eval: {set: main:data/h.parquet, every: 1, n: EVALN, max_tokens: 5, temperature: TEMP}
stages:
  sample: {kind: dataset}
  generate: {kind: rollout, sampling: {n: 2, max_tokens: 5}}
  reward: {kind: cel, spec: ../../examples/arithmetic/reward.yaml, version: VERSION}
  train: {kind: grpo}
`

func numbersConfig(repl ...string) string {
	// The first pair of a placeholder wins: the case's come first.
	r := strings.NewReplacer(append(repl, "BATCH", "2", "LR", "1e-3", "EVALN", "4", "TEMP", "1.0", "VERSION", "v1")...)
	return r.Replace(numbersBase)
}

// TestNumbers: numbers are YAML 1.2's (internal/yamlcore): 1e-3, 1E-3,
// .5 and +1e3 are floats wherever a float is wanted, as every TRL and
// verl config writes them; an integer key still refuses a fraction or
// an exponent, and a word is still an error with its line and column.
func TestNumbers(t *testing.T) {
	for _, c := range []struct {
		name, lr string
		want     float64
	}{
		{"exponent without a dot", "1e-3", 1e-3},
		{"a TRL learning rate", "1e-6", 1e-6},
		{"upper-case exponent", "1E-3", 1e-3},
		{"leading dot", ".5", 0.5},
		{"plus sign", "+1e3", 1000},
		{"with a dot, as before", "2.0e-3", 2e-3},
		{"an integer", "3", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := mustParse(t, numbersConfig("LR", c.lr))
			if got := cfg.Stages.Train.Options.(*embedded.GRPOStage).LR; got != c.want {
				t.Errorf("trainer: {lr: %s} read as %g, want %g", c.lr, got, c.want)
			}
		})
	}

	for _, c := range []struct {
		name string
		repl []string
		want string // the whole error
	}{
		{"a word", []string{"LR", "fast"}, `pipeline.yaml:5:15: trainer.lr: expected a number, got "fast"`},
		{"a quoted number is a string", []string{"LR", `"1e-3"`}, `pipeline.yaml:5:15: trainer.lr: expected a number, got "1e-3"`},
		{"a negative number is read, then checked", []string{"LR", "-2.5e-4"}, `pipeline.yaml:5:11: trainer.lr: -0.00025; it must be positive (try 1e-3)`},
		{"infinity", []string{"LR", ".inf"},
			`pipeline.yaml:5:15: trainer.lr: expected a finite number, got .inf (no key takes an infinity or NaN; a float is at most about 1.8e308)`},
		{"not a number", []string{"LR", ".nan"},
			`pipeline.yaml:5:15: trainer.lr: expected a finite number, got .nan (no key takes an infinity or NaN; a float is at most about 1.8e308)`},
		{"out of range", []string{"LR", "1e400"},
			`pipeline.yaml:5:15: trainer.lr: expected a finite number, got 1e400 (no key takes an infinity or NaN; a float is at most about 1.8e308)`},
		{"an exponent for an integer", []string{"BATCH", "1e1"},
			`pipeline.yaml:3:13: batch_size: expected an integer, got 1e1 (write it without a fraction or exponent: 10)`},
		{"a fraction for an integer", []string{"BATCH", "2.5"}, `pipeline.yaml:3:13: batch_size: expected an integer, got 2.5 (write a whole number)`},
		{"an exponent in the eval section", []string{"EVALN", "4e0"},
			`pipeline.yaml:6:47: eval.n: expected an integer, got 4e0 (write it without a fraction or exponent: 4)`},
		{"a word in the eval section", []string{"TEMP", "warm"}, `pipeline.yaml:6:78: eval.temperature: expected a number, got "warm"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Parse("pipeline.yaml", []byte(numbersConfig(c.repl...)), kinds.Registry())
			if err == nil || err.Error() != c.want {
				t.Fatalf("err = %v\nwant  %s", err, c.want)
			}
			if !errors.Is(err, pipeline.ErrConfig) {
				t.Errorf("err %v is not a config error", err)
			}
		})
	}

	t.Run("the eval section's float", func(t *testing.T) {
		cfg := mustParse(t, numbersConfig("TEMP", "7e-1"))
		if cfg.Eval.Temperature == nil || *cfg.Eval.Temperature != 0.7 {
			t.Errorf("eval.temperature %v, want 0.7", cfg.Eval.Temperature)
		}
	})
	t.Run("a string key keeps the text", func(t *testing.T) {
		cfg := mustParse(t, numbersConfig("VERSION", "1e3"))
		if v := cfg.Stages.Reward.Version; v != "1e3" {
			t.Errorf("version %q, want 1e3 as written", v)
		}
	})
}

// TestNumbersFreeForm: an external trainer's hyperparameters are free
// form and reach the trainer as JSON: 1e-6 must arrive as a number, not
// the string "1e-6"; a quoted one stays a string. The recorded config
// reads back the same.
func TestNumbersFreeForm(t *testing.T) {
	src := strings.Replace(base, "  train: {kind: standin, sleep: 1s}",
		`  train:
    kind: external
    version: 2e1
    command: [python3, train.py]
    environment: {WARMUP: 1e2}
    hyperparameters: {learning_rate: 1e-6, beta: 4E-2, steps: 10, run: '1e3', betas: [9e-1, 999e-3]}`, 1)
	check := func(c *config.Config) {
		t.Helper()
		s := c.Stages.Train.Options.(*external.Stage)
		hp := s.Hyperparameters
		if hp["learning_rate"] != 1e-6 || hp["beta"] != 0.04 || hp["run"] != "1e3" {
			t.Errorf("hyperparameters %#v", hp)
		}
		if b, ok := hp["betas"].([]any); !ok || len(b) != 2 || b[0] != 0.9 || b[1] != 0.999 {
			t.Errorf("betas %#v", hp["betas"])
		}
		if s.Environment["WARMUP"] != "1e2" || c.Stages.Train.Version != "2e1" {
			t.Errorf("environment %v, version %q: strings keep their text", s.Environment, c.Stages.Train.Version)
		}
	}
	c := mustParse(t, src)
	check(c)
	again, b := recorded(t, c)
	check(again)
	h1, _ := c.Hash()
	h2, _ := again.Hash()
	if h1 != h2 {
		t.Errorf("hash changed through YAML(): %s vs %s\n%s", h1, h2, b)
	}
}
