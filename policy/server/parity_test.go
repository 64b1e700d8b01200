package server_test

import (
	"context"
	"errors"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/server"
	"github.com/rlpipe/rlpipe/policy/server/servertest"
)

// The same policy, requests, sampling and seeds give the same samples in
// process and through the server and the client, bit for bit.
func TestParity(t *testing.T) {
	p := newDetPolicy("det")
	c, _ := servertest.Loopback(t, p, &server.Options{Model: "det"}, nil)
	ctx := context.Background()
	cases := []struct {
		name string
		reqs []policy.Request
		s    policy.Sampling
	}{
		{"completions", prompts(12, false), policy.Sampling{N: 4, Temperature: 1}},
		{"chat and completions", prompts(12, true), policy.Sampling{N: 3, Temperature: 0.7, TopP: 0.9}},
		{"logprobs", prompts(8, true), policy.Sampling{N: 4, Temperature: 1, Logprobs: true}},
		{"greedy", prompts(5, false), policy.Sampling{N: 2, Logprobs: true}},
		{"max tokens", prompts(6, true), policy.Sampling{N: 2, Temperature: 1, MaxTokens: 5, Logprobs: true}},
		{"stop strings", prompts(10, false), policy.Sampling{N: 4, Temperature: 1, Stop: []string{"世", "<>"}, Logprobs: true}},
		{"n zero means one", prompts(3, false), policy.Sampling{Temperature: 1}},
		{"empty prompt", []policy.Request{{ID: "empty", Seed: 3}}, policy.Sampling{N: 2, Temperature: 1, Logprobs: true}},
		{"negative seed", []policy.Request{{ID: "neg", Prompt: "x", Seed: -42}}, policy.Sampling{N: 2, Temperature: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := servertest.Parity(ctx, p, c, tc.reqs, tc.s); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Adapters loaded through the client sample the same way in process and
// over HTTP, and an adapter that is not loaded is policy.ErrAdapterNotLoaded
// both ways.
func TestParityAdapters(t *testing.T) {
	p := newDetPolicy("det")
	c, srv := servertest.Loopback(t, p, &server.Options{Model: "det"}, nil)
	ctx := context.Background()
	if err := c.LoadAdapter(ctx, "step-1", "/ckpt/step-1"); err != nil {
		t.Fatal(err)
	}
	if got := srv.Adapters(); len(got) != 1 || got[0] != "step-1" {
		t.Fatalf("server holds %v, want [step-1]", got)
	}
	s := policy.Sampling{N: 3, Temperature: 1, Logprobs: true, Adapter: "step-1"}
	if err := servertest.Parity(ctx, p, c, prompts(8, true), s); err != nil {
		t.Fatal(err)
	}
	// The adapter changes the samples.
	base, _ := c.Generate(ctx, prompts(1, false), policy.Sampling{N: 1, Temperature: 1})
	tuned, _ := c.Generate(ctx, prompts(1, false), policy.Sampling{N: 1, Temperature: 1, Adapter: "step-1"})
	if base[0][0].Text == tuned[0][0].Text {
		t.Errorf("the adapter did not change the text %q", base[0][0].Text)
	}
	if v := tuned[0][0].PolicyVersion; v != "det+step-1" {
		t.Errorf("policy version %q, want det+step-1", v)
	}
	s.Adapter = "step-2"
	if _, err := p.Generate(ctx, prompts(1, false), s); !errors.Is(err, policy.ErrAdapterNotLoaded) {
		t.Fatalf("in process: %v, want ErrAdapterNotLoaded", err)
	}
	if _, err := c.Generate(ctx, prompts(1, false), s); !errors.Is(err, policy.ErrAdapterNotLoaded) {
		t.Fatalf("over HTTP: %v, want ErrAdapterNotLoaded", err)
	}
}

// Invalid prompts are invalid both ways; the other requests of the batch
// are unaffected.
func TestParityInvalid(t *testing.T) {
	p := newDetPolicy("det")
	p.maxContext = 40
	c, _ := servertest.Loopback(t, p, &server.Options{Model: "det"}, nil)
	reqs := append(prompts(3, false), policy.Request{ID: "long", Prompt: string(make([]byte, 100)), Seed: 1})
	s := policy.Sampling{N: 2, Temperature: 1, Logprobs: true}
	if err := servertest.Parity(context.Background(), p, c, reqs, s); err != nil {
		t.Fatal(err)
	}
	out, err := c.Generate(context.Background(), reqs, s)
	if err != nil {
		t.Fatal(err)
	}
	if got := out[3][1]; got.Status != policy.StatusInvalid || got.FinishReason != policy.FinishError {
		t.Errorf("long prompt: %+v, want status %s", got, policy.StatusInvalid)
	}
}
