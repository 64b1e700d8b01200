// Package rolloutstest is what the tests of the stages after generate
// share of the rollout stage: the real generate task sampling the
// embedded model, whose trajectories the trainers under test train on.
//
// It sits in the unit rollouts (layer "loop", internal/layers): the
// trainers' tests use it as another unit of their own layer, and the
// layers above import it. Only tests import it, so "testing" never links
// into the command.
package rolloutstest

import (
	"testing"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/rollouts"
)

// EmbeddedGenerate is the rollout stage's task sampling the embedded
// model m, identified by its version: n completions a prompt at
// temperature 1, each of at most 5 tokens, with logprobs.
func EmbeddedGenerate(t testing.TB, m *tiny.Model, n int) *pipeline.Task {
	t.Helper()
	gen, err := rollouts.Task(rollouts.Options{Policy: tiny.NewPolicy(m), Identity: m.Version(),
		Sampling: policy.Sampling{N: n, Temperature: 1, MaxTokens: 5, Logprobs: true}})
	if err != nil {
		t.Fatal(err)
	}
	return gen
}
