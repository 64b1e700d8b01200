package kinds_test

import (
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/config/configtest"
)

// The tests of this package's config_*_test.go files read pipeline files
// that name the shipped kinds, through the registry: what a kind's
// options decode to, what a shipped example plans. They were the config's
// own tests, which now name no stage package (internal/layers).

const base = configtest.Base

// rolloutGen is a rollout generate stage.
const rolloutGen = "generate: {kind: rollout, env: gen, sampling: {n: 8, temperature: 1.0, max_tokens: 6}}"

// withRollout swaps base's stand-in generate stage for gen and appends a
// policy section.
func withRollout(gen, pol string) string {
	return strings.Replace(base, "generate: {kind: standin, env: gen, sleep: 2s, samples_per_prompt: 4}", gen, 1) + pol
}

func mustParse(t *testing.T, src string) *config.Config {
	t.Helper()
	return configtest.MustParse(t, src, kinds.Registry())
}

func recorded(t *testing.T, c *config.Config) (*config.Config, []byte) {
	t.Helper()
	return configtest.Recorded(t, c, kinds.Registry())
}
