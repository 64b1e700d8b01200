package policytest

import (
	"math"
	"slices"

	"github.com/rlpipe/rlpipe/policy"
)

// testLogprobsPerToken: asked for, every sample carries one finite
// log-probability ≤ 0 per token id, at any temperature.
func testLogprobsPerToken(f *fixture) {
	t := f.t
	for _, temp := range []float64{0, 0.7, 1} {
		out := f.generateOK("logprobs", f.requests(3), policy.Sampling{N: 2, Temperature: temp, MaxTokens: f.b.MaxTokens, Logprobs: true})
		for i, ss := range out {
			for j, smp := range ss {
				if smp.Logprobs == nil || smp.TokenIDs != nil && len(smp.Logprobs) != len(smp.TokenIDs) {
					t.Fatalf("temperature %g, request %d sample %d: %d logprobs for token ids %v", temp, i, j, len(smp.Logprobs), smp.TokenIDs)
				}
				for k, lp := range smp.Logprobs {
					if math.IsNaN(float64(lp)) || math.IsInf(float64(lp), 0) || lp > 0 {
						t.Fatalf("temperature %g, request %d sample %d: logprob %d is %v, want a finite value ≤ 0", temp, i, j, k, lp)
					}
				}
			}
		}
	}
}

// testLogprobsOnlyWhenAsked: without Logprobs, samples carry none, and
// asking for them does not change what is sampled.
func testLogprobsOnlyWhenAsked(f *fixture) {
	t := f.t
	s := policy.Sampling{N: 3, Temperature: 1, MaxTokens: f.b.MaxTokens}
	plain := f.generateOK("without logprobs", f.requests(5), s)
	s.Logprobs = true
	with := f.generateOK("with logprobs", f.requests(5), s)
	for i := range plain {
		for j, p := range plain[i] {
			w := with[i][j]
			switch {
			case p.Logprobs != nil:
				t.Fatalf("without logprobs, request %d sample %d: %d logprobs", i, j, len(p.Logprobs))
			case p.Text != w.Text || !slices.Equal(p.TokenIDs, w.TokenIDs) || p.FinishReason != w.FinishReason:
				t.Fatalf("request %d sample %d: %q %v %s without logprobs, %q %v %s with them; want the same sample", i, j, p.Text, p.TokenIDs, p.FinishReason, w.Text, w.TokenIDs, w.FinishReason)
			}
		}
	}
}
