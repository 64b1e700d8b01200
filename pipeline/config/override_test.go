package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/config/configtest"
	"github.com/rlpipe/rlpipe/pipeline/standin"
)

func TestOverrides(t *testing.T) {
	for _, tc := range []struct {
		name      string
		overrides []string
		check     func(t *testing.T, c *config.Config)
	}{
		{"a top-level scalar", []string{"iterations=5"}, func(t *testing.T, c *config.Config) {
			if c.Iterations != 5 {
				t.Errorf("iterations = %d, want 5", c.Iterations)
			}
		}},
		{"a key of a stage kind", []string{"stages.generate.samples_per_prompt=8"}, func(t *testing.T, c *config.Config) {
			if g := c.Stages.Generate.Options.(*standin.Stage); g.SamplesPerPrompt != 8 || g.Sleep.String() != "2s" || c.Stages.Generate.Env != "gen" {
				t.Errorf("stages.generate = %+v, env %s", g, c.Stages.Generate.Env)
			}
		}},
		{"a flow mapping replaces the key's value whole", []string{"environments.gen.retries={attempts: 5}"}, func(t *testing.T, c *config.Config) {
			if r := c.Environments["gen"].Retry; r.Attempts != 5 || r.Backoff != 0 {
				t.Errorf("retries = %+v, want 5 attempts and no backoff", r)
			}
		}},
		{"missing parents are added", []string{"overlap.max_staleness=1", "environments.new.concurrency=2"}, func(t *testing.T, c *config.Config) {
			if c.Overlap.MaxStaleness != 1 || c.Environments["new"].Concurrency != 2 {
				t.Errorf("overlap %+v, environments.new %+v", c.Overlap, c.Environments["new"])
			}
		}},
		{"a later override wins, and descends into an earlier one", []string{"iterations=5", "iterations=6", "environments.gen.retries={attempts: 5}", "environments.gen.retries.backoff=1s"}, func(t *testing.T, c *config.Config) {
			if r := c.Environments["gen"].Retry; c.Iterations != 6 || r.Attempts != 5 || r.Backoff.String() != "1s" {
				t.Errorf("iterations %d, retries %+v", c.Iterations, r)
			}
		}},
		{"a string that looks like a number stays as written", []string{"run=1e3"}, func(t *testing.T, c *config.Config) {
			if c.Run != "1e3" {
				t.Errorf("run = %q, want 1e3", c.Run)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse("pipeline.yaml", []byte(configtest.Base), kinds.Registry(), tc.overrides...)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
			// The recorded (effective) config holds the overrides.
			again, _ := configtest.Recorded(t, c, kinds.Registry())
			tc.check(t, again)
		})
	}
}

func TestOverrideErrors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		overrides []string
		want      string
		override  bool // an ErrOverride (the syntax), not a problem of the config
	}{
		{"a wrong type", []string{"iterations=abc"},
			`override iterations=abc: iterations: expected an integer, got "abc"`, false},
		{"a key that does not exist, with a hint", []string{"stages.generate.samples_per_promt=8"},
			`override stages.generate.samples_per_promt=8: unknown key "samples_per_promt" in stages.generate (did you mean "samples_per_prompt"?)`, false},
		{"an unknown top-level key", []string{"iteration=5"},
			`override iteration=5: unknown key "iteration" at the top level (did you mean "iterations"?)`, false},
		{"a range the validation refuses", []string{"batch_size=0"},
			"override batch_size=0: batch_size: must be at least 1, got 0", false},
		{"only the bad one of several is named", []string{"iterations=4", "environments.gen.retries.backoff=soon"},
			`override environments.gen.retries.backoff=soon: environments.gen.retries.backoff: "soon" is not a duration (write a Go duration such as "200ms", "2s" or "5m")`, false},
		{"no equals sign", []string{"iterations"},
			"override iterations: write key.path=value, e.g. stages.train.lr=1e-6 or eval.k=[1,4]; a value of null unsets the key", true},
		{"an empty key segment", []string{"stages..kind=x"},
			"override stages..kind=x: write key.path=value, e.g. stages.train.lr=1e-6 or eval.k=[1,4]; a value of null unsets the key", true},
		{"a value that is not YAML", []string{"eval.k=[1, 4"},
			"override eval.k=[1, 4: the value is not YAML: ", true},
		{"a key below a scalar", []string{"seed.value=3"},
			`override seed.value=3: seed is 7 at pipeline.yaml:2:7, not a mapping (set it whole: seed={…} or seed=[…])`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("pipeline.yaml", []byte(configtest.Base), kinds.Registry(), tc.overrides...)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.override && !strings.HasPrefix(err.Error(), tc.want) || !tc.override && err.Error() != tc.want {
				t.Errorf("error:\n%v\nwant:\n%s", err, tc.want)
			}
			if !errors.Is(err, pipeline.ErrConfig) || errors.Is(err, config.ErrOverride) != tc.override {
				t.Errorf("errors.Is(ErrConfig) %v, errors.Is(ErrOverride) %v", errors.Is(err, pipeline.ErrConfig), errors.Is(err, config.ErrOverride))
			}
		})
	}
}
