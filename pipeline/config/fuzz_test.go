package config_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
)

// FuzzParse checks that the parser never panics, that every error is a
// config error, and that an accepted config plans and records.
func FuzzParse(f *testing.F) {
	f.Add([]byte(base))
	for _, p := range []string{"../../examples/standin/pipeline.yaml", "testdata/command.yaml"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("stages: {sample: &a {kind: standin}, generate: *a}\n"))
	f.Add([]byte("environments: {x: {<<: {timeout: 1s}}}\n"))
	f.Add([]byte("iterations: !!str 3\n"))
	// Numbers of YAML 1.2 (yamlcore): exponents without a dot, infinities,
	// and a number where a string or an integer is wanted.
	f.Add([]byte("batch_size: 2\ntrainer: {lr: 1e-3}\neval: {set: main:data/h.parquet, every: 1, n: 4, max_tokens: 5, temperature: 1.0}\n"))
	f.Add([]byte("batch_size: 1e1\ntrainer: {lr: +.inf}\nstages: {reward: {kind: standin, version: 1e3}}\n"))
	f.Add([]byte("trainer: {lr: 1E-3, epochs: 1e400}\nseed: .5\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := config.Parse("f.yaml", data, kinds.Registry())
		if err != nil {
			if !errors.Is(err, pipeline.ErrConfig) {
				t.Fatalf("error is not a config error: %v", err)
			}
			return
		}
		if _, err := c.Plan(context.Background()); err != nil {
			t.Fatalf("an accepted config does not plan: %v", err)
		}
		if _, err := c.YAML(); err != nil {
			t.Fatalf("an accepted config does not encode: %v", err)
		}
	})
}

// FuzzOverride checks that no override (key.path=value) makes the parser
// panic, that every error is a config error, and that an override the
// parser accepts records a config that parses again.
func FuzzOverride(f *testing.F) {
	for _, o := range []string{"iterations=5", "environments.gen.retries={attempts: 5}", "eval.k=[1, 4",
		"seed.value=3", "stages..kind=x", "=", "stages.generate=null", "stages.generate.samples_per_prompt=&a 2",
		"environments.x=*a", "run=\"a: b\"", "tracking=[{kind: tensorboard, dir: tb}]"} {
		f.Add(o)
	}
	f.Fuzz(func(t *testing.T, o string) {
		c, err := config.Parse("f.yaml", []byte(base), kinds.Registry(), o)
		if err != nil {
			if !errors.Is(err, pipeline.ErrConfig) {
				t.Fatalf("error is not a config error: %v", err)
			}
			return
		}
		b, err := c.YAML()
		if err != nil {
			t.Fatalf("an accepted config does not encode: %v", err)
		}
		if _, err := config.Parse("run/config.yaml", b, kinds.Registry()); err != nil {
			t.Fatalf("the recorded config does not parse: %v\n%s", err, b)
		}
	})
}
