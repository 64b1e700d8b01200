package policytest

import (
	"context"
	"errors"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
)

// testInvalidPrompt: a prompt the policy cannot serve gives samples with
// StatusInvalid, and the other requests of the batch are served.
func testInvalidPrompt(f *fixture) {
	t := f.t
	if f.b.Invalid == "" {
		t.Skip("the backend names no invalid prompt (Backend.Invalid)")
	}
	valid := f.requests(1)
	reqs := []policy.Request{valid[0], {ID: "invalid", Prompt: f.b.Invalid, Seed: 9}, valid[1]}
	out := f.generate("invalid prompt", reqs, policy.Sampling{N: 2, Temperature: 1, MaxTokens: f.b.MaxTokens})
	if err := invalid(out[1]); err != nil {
		t.Fatalf("invalid prompt %q: %v", f.b.Invalid, err)
	}
	for _, i := range []int{0, 2} {
		for j, smp := range out[i] {
			if smp.Status != policy.StatusOK {
				t.Fatalf("request %d beside an invalid one, sample %d: status %q (%s), want %q", i, j, smp.Status, smp.Error, policy.StatusOK)
			}
		}
	}
}

// testPromptAndMessages: a request with both a prompt and messages is
// invalid (policy.Validate), and only it.
func testPromptAndMessages(f *fixture) {
	t := f.t
	reqs := f.requests(1)
	reqs[0].Messages = []policy.Message{{Role: "user", Content: reqs[0].Prompt}}
	out := f.generate("prompt and messages", reqs, policy.Sampling{N: 2, Temperature: 1, MaxTokens: f.b.MaxTokens})
	if err := invalid(out[0]); err != nil {
		t.Fatalf("a request with a prompt and messages: %v", err)
	}
	for j, smp := range out[1] {
		if smp.Status != policy.StatusOK {
			t.Fatalf("request 1 beside an invalid one, sample %d: status %q (%s), want %q", j, smp.Status, smp.Error, policy.StatusOK)
		}
	}
}

// testBadSampling: sampling parameters policy.Validate refuses fail the
// call, or give every request samples with StatusInvalid.
func testBadSampling(f *fixture) {
	for _, tc := range []struct {
		name string
		s    policy.Sampling
	}{
		{"negative n", policy.Sampling{N: -1, MaxTokens: f.b.MaxTokens}},
		{"negative temperature", policy.Sampling{Temperature: -0.5, MaxTokens: f.b.MaxTokens}},
		{"top_p above 1", policy.Sampling{Temperature: 1, TopP: 1.5, MaxTokens: f.b.MaxTokens}},
		{"negative top_p", policy.Sampling{Temperature: 1, TopP: -0.1, MaxTokens: f.b.MaxTokens}},
		{"negative max_tokens", policy.Sampling{MaxTokens: -1}},
	} {
		f.t.Run(tc.name, func(t *testing.T) {
			if policy.Validate(nil, tc.s) == nil {
				t.Fatalf("policy.Validate accepts %+v", tc.s)
			}
			reqs := f.requests(1)
			out, err := f.b.Policy.Generate(f.ctx, reqs, tc.s)
			if err != nil {
				return // the call failed: fine
			}
			if len(out) != len(reqs) {
				t.Fatalf("%+v: %d answers for %d requests and no error", tc.s, len(out), len(reqs))
			}
			for i, ss := range out {
				if err := invalid(ss); err != nil {
					t.Fatalf("%+v, request %d: %v; want an error or invalid samples", tc.s, i, err)
				}
			}
		})
	}
}

// testCanceled: a call under a canceled context fails with an error
// wrapping context.Canceled.
func testCanceled(f *fixture) {
	ctx, cancel := context.WithCancel(f.ctx)
	cancel()
	_, err := f.b.Policy.Generate(ctx, f.requests(1), policy.Sampling{N: 2, Temperature: 1, MaxTokens: f.b.MaxTokens})
	if !errors.Is(err, context.Canceled) {
		f.t.Fatalf("generate under a canceled context: %v, want an error wrapping %v", err, context.Canceled)
	}
}
