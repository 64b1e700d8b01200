package rollouts_test

import (
	"testing"

	"github.com/rlpipe/rlpipe/environments/arith"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/server"
	"github.com/rlpipe/rlpipe/policy/server/servertest"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// BenchmarkEmbeddedHTTPvsInProcess samples the embedded model on the same
// prompts in process and through `rlpipe policy serve`'s server and the
// OpenAI client over loopback, and reports http/inprocess samples/s (the
// issue's target is ≥ 0.8). The shape is one RL step of the demo: 64
// prompts × 8 samples, 5 tokens at most, with logprobs.
func BenchmarkEmbeddedHTTPvsInProcess(b *testing.B) {
	m, err := tiny.Embedded()
	if err != nil {
		b.Fatal(err)
	}
	var reqs []policy.Request
	for i, p := range arith.Train(1, 64) {
		reqs = append(reqs, policy.Request{ID: p.ID(), Prompt: p.Prompt(), Seed: int64(i)})
	}
	s := policy.Sampling{N: 8, Temperature: 1, MaxTokens: 5, Logprobs: true}
	servertest.Compare(b, tiny.NewPolicy(m), &server.Options{Model: m.Version()}, nil, reqs, s)
}
