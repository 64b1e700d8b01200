package kinds_test

import (
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline/config"
)

// The tests of this package's config_*_test.go files read pipeline files
// that name the shipped kinds, through the registry: what a kind's
// options decode to, what a shipped example plans. They were the config's
// own tests, which now name no stage package (internal/layers).

// base is a pipeline file of stand-in stages.
const base = `run: exp1
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

// rolloutGen is a rollout generate stage.
const rolloutGen = "generate: {kind: rollout, env: gen, sampling: {n: 8, temperature: 1.0, max_tokens: 6}}"

// withRollout swaps base's stand-in generate stage for gen and appends a
// policy section.
func withRollout(gen, pol string) string {
	return strings.Replace(base, "generate: {kind: standin, env: gen, sleep: 2s, samples_per_prompt: 4}", gen, 1) + pol
}

// mustParse parses src with the shipped registry.
func mustParse(t *testing.T, src string) *config.Config {
	t.Helper()
	c, err := config.Parse("pipeline.yaml", []byte(src), kinds.Registry())
	if err != nil {
		t.Fatalf("parse:\n%s\n%v", src, err)
	}
	return c
}

// recorded is c as a run records it (YAML) parsed back, and that YAML.
func recorded(t *testing.T, c *config.Config) (*config.Config, []byte) {
	t.Helper()
	b, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	again, err := config.Parse("run/config.yaml", b, kinds.Registry())
	if err != nil {
		t.Fatalf("the recorded config does not parse: %v\n%s", err, b)
	}
	return again, b
}
