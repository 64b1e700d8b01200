// Package configtest is what tests of pipeline files share: a file of
// stand-in stages to edit, and parsing that fails the test. The config's
// own tests and those of the shipped kinds' options (cli/kinds) use it
// with the registry they test.
package configtest

import (
	"context"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/kind"
)

// Base is a pipeline file of stand-in stages, its generate stage in the
// task environment gen.
const Base = `run: exp1
seed: 7
iterations: 3
batch_size: 4
dataset: main:data/prompts.parquet
environments:
  gen:
    retries: {attempts: 3, backoff: 200ms}
stages:
  sample: {kind: standin}
  generate: {kind: standin, env: gen, sleep: 2s, samples_per_prompt: 4}
  reward: {kind: standin}
  train: {kind: standin, sleep: 1s}
`

// MustParse parses src as pipeline.yaml with reg; an error fails t.
func MustParse(t testing.TB, src string, reg *kind.Registry) *config.Config {
	t.Helper()
	c, err := config.Parse("pipeline.yaml", []byte(src), reg)
	if err != nil {
		t.Fatalf("parse:\n%s\n%v", src, err)
	}
	return c
}

// Recorded is c as a run records it (YAML) parsed back with reg, and
// that YAML.
func Recorded(t testing.TB, c *config.Config, reg *kind.Registry) (*config.Config, []byte) {
	t.Helper()
	b, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	again, err := config.Parse(runs.ConfigPath, b, reg)
	if err != nil {
		t.Fatalf("the recorded config does not parse: %v\n%s", err, b)
	}
	return again, b
}

// MustPlan is c's plan, failing the test when it cannot be made; the plan
// is closed when the test ends.
func MustPlan(t testing.TB, c *config.Config) config.Plan {
	t.Helper()
	p, err := c.Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
