package vllm_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/environments/arith"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/policy/vllmserver"
	"github.com/rlpipe/rlpipe/policy/vllmserver/vllmtest"
)

// BenchmarkVLLMvsEmbedded samples one demo step — 64 held-out arithmetic
// prompts × 8 completions of up to 5 tokens, temperature 1, with logprobs
// — from vLLM serving the export of tiny-arith and from the embedded
// engine in process, and reports each one's sampled tokens/s and
// vllm/embedded. vLLM's start is not timed.
func BenchmarkVLLMvsEmbedded(b *testing.B) {
	py := vllmtest.Python(b)
	model := vllmtest.Export(b, "tiny-arith")
	srv := vllmtest.Start(b, vllmserver.Options{Python: py, Model: model, Name: "tiny-arith"})
	c, err := openai.New(&openai.Options{Endpoints: []string{srv.URL()}, Model: "tiny-arith", Concurrency: 16})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	m, err := tiny.Embedded()
	if err != nil {
		b.Fatal(err)
	}
	embedded := tiny.NewPolicy(m)

	var reqs []policy.Request
	for i, pr := range arith.HeldOutSet(64) {
		reqs = append(reqs, policy.Request{ID: pr.ID(), Prompt: pr.Prompt(), Seed: int64(1000 + i)})
	}
	s := policy.Sampling{N: 8, Temperature: 1, MaxTokens: 5, Logprobs: true}
	ctx := context.Background()
	// One untimed call each: vLLM's first batch compiles and warms caches.
	for _, p := range []policy.Policy{c, embedded} {
		if _, err := sample(ctx, p, reqs, s); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	var dur [2]time.Duration
	var toks [2]int
	for range b.N {
		for k, p := range []policy.Policy{c, embedded} {
			start := time.Now()
			n, err := sample(ctx, p, reqs, s)
			if err != nil {
				b.Fatal(err)
			}
			dur[k] += time.Since(start)
			toks[k] += n
		}
	}
	b.StopTimer()
	v, e := float64(toks[0])/dur[0].Seconds(), float64(toks[1])/dur[1].Seconds()
	b.ReportMetric(v, "vllm_tok/s")
	b.ReportMetric(e, "embedded_tok/s")
	b.ReportMetric(v/e, "vllm/embedded")
	b.ReportMetric(0, "ns/op")
}

// sample generates and counts the sampled tokens, failing on any sample
// that is not ok.
func sample(ctx context.Context, p policy.Policy, reqs []policy.Request, s policy.Sampling) (int, error) {
	out, err := p.Generate(ctx, reqs, s)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ss := range out {
		for _, smp := range ss {
			if smp.Status != policy.StatusOK {
				return 0, fmt.Errorf("%s/%d: %s %s", smp.RequestID, smp.Index, smp.Status, smp.Error)
			}
			n += len(smp.TokenIDs)
		}
	}
	return n, nil
}
