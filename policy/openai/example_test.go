package openai_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai"
	"github.com/rlpipe/rlpipe/policy/server"
)

// shout is a toy policy: it answers a prompt in capitals, one token per
// byte, and with an adapter loaded, in reverse.
type shout struct{ adapters map[string]bool }

func (p *shout) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	if s.Adapter != "" && !p.adapters[s.Adapter] {
		return nil, fmt.Errorf("%w: %s", policy.ErrAdapterNotLoaded, s.Adapter)
	}
	out := make([][]policy.Sample, len(reqs))
	for i, r := range reqs {
		text := strings.ToUpper(r.Prompt)
		if s.Adapter != "" {
			b := []byte(text)
			for l, k := 0, len(b)-1; l < k; l, k = l+1, k-1 {
				b[l], b[k] = b[k], b[l]
			}
			text = string(b)
		}
		for j := range s.Samples() {
			smp := policy.Sample{RequestID: r.ID, Index: j, Text: text, FinishReason: policy.FinishStop, Status: policy.StatusOK}
			for _, c := range []byte(text) {
				smp.TokenIDs = append(smp.TokenIDs, int32(c))
				if s.Logprobs {
					smp.Logprobs = append(smp.Logprobs, -0.25)
				}
			}
			out[i] = append(out[i], smp)
		}
	}
	return out, nil
}

func (p *shout) LoadAdapter(ctx context.Context, name, dir string) error {
	p.adapters[name] = true
	return nil
}

func (p *shout) UnloadAdapter(ctx context.Context, name string) error {
	delete(p.adapters, name)
	return nil
}

// A client samples from OpenAI-compatible servers. Here the server is
// rlpipe's policy server around a toy policy; in a run it is vllm serve,
// SGLang or `rlpipe policy serve`.
func Example() {
	srv, _ := server.New(&shout{}, &server.Options{Model: "toy"})
	hs := httptest.NewServer(srv)
	defer hs.Close()

	c, err := openai.New(&openai.Options{Endpoints: []string{hs.URL}, Model: "toy"})
	if err != nil {
		fmt.Println(err)
		return
	}
	reqs := []policy.Request{{ID: "q1", Prompt: "hi", Seed: 1}}
	out, err := c.Generate(context.Background(), reqs, policy.Sampling{N: 2, MaxTokens: 8, Logprobs: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range out[0] {
		fmt.Println(s.RequestID, s.Index, s.Status, s.Text, s.TokenIDs, s.Logprobs, s.PolicyVersion)
	}
	// Output:
	// q1 0 ok HI [72 73] [-0.25 -0.25] toy
	// q1 1 ok HI [72 73] [-0.25 -0.25] toy
}

// New checks the endpoints; the API key stays out of what the client
// prints.
func ExampleNew() {
	c, err := openai.New(&openai.Options{
		Endpoints: []string{"http://10.0.0.5:8000", "http://10.0.0.6:8000/v1"},
		Model:     "Qwen/Qwen2.5-0.5B-Instruct",
		APIKey:    "sk-from-the-environment",
	})
	fmt.Println(c, err)
	_, err = openai.New(&openai.Options{Endpoints: []string{"10.0.0.5:8000"}})
	fmt.Println(err)
	// Output:
	// openai.Client{Endpoints: ["http://10.0.0.5:8000" "http://10.0.0.6:8000/v1"], Model: "Qwen/Qwen2.5-0.5B-Instruct", Chat: false, APIKey: "[redacted]", Concurrency: 8, Timeout: 5m0s, Retries: 4, Backoff: 500ms, MaxBackoff: 30s, Cooldown: 10s, Seed: 0} <nil>
	// openai: endpoint "10.0.0.5:8000" is not an http(s) base URL such as http://127.0.0.1:8000
}

// A request that fails is samples with a status and an error that says
// what to do, not a Go error.
func ExampleClient_Generate_failure() {
	c, _ := openai.New(&openai.Options{Endpoints: []string{"http://127.0.0.1:1"}, Retries: -1})
	out, err := c.Generate(context.Background(), []policy.Request{{ID: "q1", Prompt: "hi"}}, policy.Sampling{N: 2})
	fmt.Println(err, len(out[0]), out[0][0].Status, out[0][0].FinishReason)
	fmt.Println(out[0][0].Error[:strings.Index(out[0][0].Error, ":1/")+3])
	fmt.Println(out[0][0].Error[strings.Index(out[0][0].Error, "next:"):])
	// Output:
	// <nil> 2 infra_error error
	// request "q1": POST http://127.0.0.1:1/
	// next: start the server at http://127.0.0.1:1 (e.g. vllm serve or rlpipe policy serve), or remove it from the endpoints
}

// Adapters are loaded on every endpoint and selected per batch by
// Sampling.Adapter; PruneAdapters keeps the newest few.
func ExampleClient_LoadAdapter() {
	srv, _ := server.New(&shout{adapters: map[string]bool{}}, &server.Options{Model: "toy"})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c, _ := openai.New(&openai.Options{Endpoints: []string{hs.URL}, Model: "toy"})
	ctx := context.Background()

	for _, step := range []string{"step-1", "step-2", "step-3"} {
		// The server reads the directory: it must exist on its machine.
		if err := c.LoadAdapter(ctx, step, "/shared/checkpoints/"+step); err != nil {
			fmt.Println(err)
			return
		}
	}
	out, _ := c.Generate(ctx, []policy.Request{{ID: "q1", Prompt: "abc"}}, policy.Sampling{Adapter: "step-3"})
	fmt.Println(out[0][0].Text, out[0][0].PolicyVersion)

	unloaded, _ := c.PruneAdapters(ctx, 1)
	models, _ := c.Models(ctx)
	fmt.Println(unloaded, c.Adapters(), models[hs.URL])

	_, err := c.Generate(ctx, []policy.Request{{ID: "q1", Prompt: "abc"}}, policy.Sampling{Adapter: "step-1"})
	fmt.Println(errors.Is(err, policy.ErrAdapterNotLoaded))
	// Output:
	// CBA toy+step-3
	// [step-1 step-2] [step-3] [toy step-3]
	// true
}
