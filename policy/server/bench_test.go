package server_test

import (
	"fmt"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/server"
	"github.com/rlpipe/rlpipe/policy/server/servertest"
)

// BenchmarkLoopback compares samples per second of the deterministic test
// policy in process and through the server and the client on loopback;
// the http/inprocess metric is the share of in-process throughput HTTP
// keeps. The test policy costs almost nothing, so this is the hop's
// overhead at its most visible; a real model hides most of it.
func BenchmarkLoopback(b *testing.B) {
	for _, tc := range []struct {
		prompts, n int
		logprobs   bool
	}{
		{64, 1, false},
		{64, 8, true},
		{16, 64, true},
	} {
		s := policy.Sampling{N: tc.n, Temperature: 1, Logprobs: tc.logprobs}
		b.Run(fmt.Sprintf("prompts=%d/n=%d/logprobs=%t", tc.prompts, tc.n, tc.logprobs), func(b *testing.B) {
			servertest.Compare(b, newDetPolicy("det"), &server.Options{Model: "det"}, nil, prompts(tc.prompts, true), s)
		})
	}
}
