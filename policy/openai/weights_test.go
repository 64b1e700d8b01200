package openai_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai"
)

// weightCalls lists the weight requests an endpoint received, as
// "reload PATH", "reset", and "sample MODEL" for generations.
func weightCalls(f *fakeVLLM) []string {
	var out []string
	for _, r := range f.Requests() {
		switch r.Path {
		case "/collective_rpc":
			kw, _ := r.Body["kwargs"].(map[string]any)
			out = append(out, fmt.Sprintf("%v %v", r.Body["method"], kw["weights_path"]))
		case "/reset_prefix_cache":
			out = append(out, "reset")
		case "/v1/completions":
			out = append(out, fmt.Sprintf("sample %v", r.Body["model"]))
		}
	}
	return out
}

// LoadWeights reloads every endpoint in place and drops its prefix
// cache; sampling the weights names the base model and records the
// weights' name as the policy version; sampling weights loaded before
// reloads them; the base model, whose weights are gone, and unloaded
// weights are errors that say so.
func TestWeightsReload(t *testing.T) {
	fs := []*fakeVLLM{newFake(t, nil), newFake(t, nil)}
	c, _ := newClient(t, openai.Options{Model: "base"}, fs[0].URL, fs[1].URL)
	ctx := context.Background()
	if err := c.LoadWeights(ctx, "weights-1", "/shared/w1"); err != nil {
		t.Fatal(err)
	}
	out := generate(t, c, reqs(1), policy.Sampling{N: 1, Adapter: "weights-1"})
	wantStatus(t, out, policy.StatusOK)
	if v := out[0][0].PolicyVersion; v != "base+weights-1" {
		t.Errorf("policy version %q, want base+weights-1", v)
	}
	if err := c.LoadWeights(ctx, "weights-2", "/shared/w2"); err != nil {
		t.Fatal(err)
	}
	generate(t, c, reqs(1), policy.Sampling{N: 1, Adapter: "weights-2"})
	generate(t, c, reqs(1), policy.Sampling{N: 1, Adapter: "weights-1"}) // reloads w1
	generate(t, c, reqs(1), policy.Sampling{N: 1, Adapter: "weights-1"}) // already live
	var got []string
	for _, f := range fs {
		got = append(got, weightCalls(f)...)
	}
	want := []string{"reload_weights /shared/w1", "reset", "reload_weights /shared/w2", "reset", "reload_weights /shared/w1", "reset"}
	if n := len(weightCalls(fs[0])) + len(weightCalls(fs[1])); n != 2*len(want)+4 {
		t.Errorf("%d requests in all (%v), want %d reloads and resets and 4 samples", n, got, 2*len(want))
	}
	for i, f := range fs {
		var reloads []string
		for _, c := range weightCalls(f) {
			if !strings.HasPrefix(c, "sample") {
				reloads = append(reloads, c)
			} else if c != "sample base" {
				t.Errorf("endpoint %d: %q, want the base model's name", i, c)
			}
		}
		if !reflect.DeepEqual(reloads, want) {
			t.Errorf("endpoint %d: %v, want %v", i, reloads, want)
		}
	}
	loaded, live := c.Weights()
	if !reflect.DeepEqual(loaded, []string{"weights-1", "weights-2"}) || live != "weights-1" {
		t.Errorf("Weights() = %v, %q; want [weights-1 weights-2], weights-1", loaded, live)
	}

	_, err := c.Generate(ctx, reqs(1), policy.Sampling{N: 1})
	if !errors.Is(err, openai.ErrBaseReplaced) || err.Error() != `openai: sample the base model "base" (or an adapter on it): the servers' base weights were replaced: the servers hold weights-1, loaded by LoadWeights; restart them to sample the base model, or sample the weights` {
		t.Errorf("base model after a reload: %v", err)
	}
	if err := c.UnloadWeights(ctx, "weights-2"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Generate(ctx, reqs(1), policy.Sampling{N: 1, Adapter: "weights-2"})
	if !errors.Is(err, policy.ErrAdapterNotLoaded) || err.Error() != "adapter not loaded: weights weights-2: load them with LoadWeights first" {
		t.Errorf("unloaded weights: %v", err)
	}
}

// A reload waits for the calls sampling the weights the servers hold, so
// no request runs on weights it did not name.
func TestWeightsReloadWaitsForDrain(t *testing.T) {
	f := newFake(t, nil)
	c, _ := newClient(t, openai.Options{Model: "base"}, f.URL)
	ctx := context.Background()
	if err := c.LoadWeights(ctx, "weights-1", "/w1"); err != nil {
		t.Fatal(err)
	}
	gate, arrived := make(chan struct{}), make(chan int, 1)
	f.Set(nil, gate, arrived)
	sampled := make(chan error, 1)
	go func() {
		_, err := c.Generate(ctx, reqs(1), policy.Sampling{N: 1, Adapter: "weights-1"})
		sampled <- err
	}()
	<-arrived // the request on weights-1 is at the server
	loaded := make(chan error, 1)
	go func() { loaded <- c.LoadWeights(ctx, "weights-2", "/w2") }()
	for v, ok := openai.WeightsWaiting(c); !ok || v != "weights-2"; v, ok = openai.WeightsWaiting(c) {
		runtime.Gosched()
	}
	if err := c.UnloadWeights(ctx, "weights-2"); !errors.Is(err, openai.ErrWeightsLoading) ||
		err.Error() != "openai: unload weights weights-2: a reload is reading them" {
		t.Errorf("unload the weights a reload waits for: %v, want ErrWeightsLoading", err)
	}
	before := weightCalls(f)
	close(gate)
	if err := <-sampled; err != nil {
		t.Fatal(err)
	}
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	if want := []string{"reload_weights /w1", "reset", "sample base"}; !reflect.DeepEqual(before, want) {
		t.Errorf("while a call sampled weights-1 the server got %v, want %v (no reload)", before, want)
	}
	if got := weightCalls(f)[3:]; !reflect.DeepEqual(got, []string{"reload_weights /w2", "reset"}) {
		t.Errorf("after it: %v, want the reload of /w2", got)
	}
	if err := c.UnloadWeights(ctx, "weights-2"); err != nil {
		t.Errorf("unload the weights once reloaded: %v", err)
	}
}

// A call for the base model (an evaluation of iteration 0) is not
// starved by calls on the live weights: once it waits to reload the base,
// a new call on the live weights waits behind it, and the server sees the
// base reloaded before that call samples.
func TestWeightsBaseIsNotStarved(t *testing.T) {
	models := func(k int, r seen, w http.ResponseWriter) bool {
		if r.Path != "/v1/models" {
			return false
		}
		writeJSON(w, map[string]any{"object": "list", "data": []any{map[string]any{"id": "base", "root": "/models/base"}}})
		return true
	}
	f := newFake(t, models)
	c, _ := newClient(t, openai.Options{Model: "base"}, f.URL)
	ctx := context.Background()
	if err := c.LoadWeights(ctx, "weights-1", "/w1"); err != nil {
		t.Fatal(err)
	}
	gate, arrived := make(chan struct{}), make(chan int, 3)
	f.Set(models, gate, arrived)
	done := make(chan error, 3)
	sample := func(adapter string) {
		_, err := c.Generate(ctx, reqs(1), policy.Sampling{N: 1, Adapter: adapter})
		done <- err
	}
	go sample("weights-1")
	<-arrived // the first call on weights-1 is at the server
	go sample("")
	waitFor(t, "the base call to wait", func() bool { v, ok := openai.WeightsWaiting(c); return ok && v == "" })
	go sample("weights-1")
	waitFor(t, "the second weights-1 call to wait behind the base", func() bool { return openai.WeightsWaiters(c) == 2 })
	close(gate)
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	got := weightCalls(f)[2:]
	want := []string{"sample base", "reload_weights /models/base", "reset", "sample base", "reload_weights /w1", "reset", "sample base"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the server got %v, want %v: the base reloaded before the second weights-1 call", got, want)
	}
}

// waitFor yields until ok holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// A server without vLLM's dev endpoints (404), or whose worker cannot
// load the directory (vLLM's 500), refuses the reload at once: the error
// names the endpoint, the server's message and the step that fixes it,
// and matches ErrWeightsRefused and policy.ErrAdapterInput.
func TestWeightsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"no dev mode", http.StatusNotFound, `{"detail":"Not Found"}`,
			`openai: load weights "weights-1" from /w1: POST %s/collective_rpc: 404 Not Found: {"detail":"Not Found"}; next: the server at %[1]s has no weight-reload endpoint: restart vLLM with VLLM_SERVER_DEV_MODE=1 in its environment (its /collective_rpc reloads weights), or train a LoRA adapter`},
		{"no weights", http.StatusInternalServerError,
			`{"error":{"message":"Call to collective_rpc method failed: Worker failed with error 'Cannot find any model weights with ` + "`<path>`" + `', please check the stack trace above for the root cause","type":"InternalServerError","param":null,"code":500}}`,
			"openai: load weights \"weights-1\" from /w1: POST %s/collective_rpc: 500 Internal Server Error: Call to collective_rpc method failed: Worker failed with error 'Cannot find any model weights with `<path>`', please check the stack trace above for the root cause; next: the server reads /w1 itself and finds no weights there: give it a path it can read (policy.adapter_root, a shared mount) holding config.json and model.safetensors (or shards and model.safetensors.index.json)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(k int, r seen, w http.ResponseWriter) bool {
				if r.Path != "/collective_rpc" {
					return false
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
				return true
			})
			c, _ := newClient(t, openai.Options{Retries: 2}, f.URL)
			err := c.LoadWeights(context.Background(), "weights-1", "/w1")
			if !errors.Is(err, openai.ErrWeightsRefused) || !errors.Is(err, policy.ErrAdapterInput) {
				t.Errorf("err = %v, want ErrWeightsRefused and policy.ErrAdapterInput", err)
			}
			if want := fmt.Sprintf(tc.want, f.URL); err == nil || err.Error() != want {
				t.Errorf("err =\n%v\nwant\n%s", err, want)
			}
			if got := weightCalls(f); len(got) != 1 {
				t.Errorf("%v, want one reload: a refusal is not retried", got)
			}
			if loaded, _ := c.Weights(); len(loaded) != 0 {
				t.Errorf("Weights() = %v after a refused load", loaded)
			}
		})
	}
}

// Servers that name the directory they started from (vLLM's GET
// /v1/models root) get it back for a request on the base model after
// weights replaced it, each endpoint its own.
func TestWeightsReloadTheBaseModel(t *testing.T) {
	var fs []*fakeVLLM
	for i := range 2 {
		root := fmt.Sprintf("/models/base-%d", i)
		fs = append(fs, newFake(t, func(k int, r seen, w http.ResponseWriter) bool {
			if r.Path != "/v1/models" {
				return false
			}
			writeJSON(w, map[string]any{"object": "list", "data": []any{
				map[string]any{"id": "base", "root": root, "parent": nil},
				map[string]any{"id": "lora-1", "root": "/loras/1", "parent": "base"}}})
			return true
		}))
	}
	c, _ := newClient(t, openai.Options{Model: "base"}, fs[0].URL, fs[1].URL)
	ctx := context.Background()
	generate(t, c, reqs(1), policy.Sampling{N: 1})
	if err := c.LoadWeights(ctx, "weights-1", "/shared/w1"); err != nil {
		t.Fatal(err)
	}
	out := generate(t, c, reqs(1), policy.Sampling{N: 1})
	wantStatus(t, out, policy.StatusOK)
	if v := out[0][0].PolicyVersion; v != "base" {
		t.Errorf("policy version %q, want base", v)
	}
	for i, f := range fs {
		got := slices.DeleteFunc(weightCalls(f), func(s string) bool { return strings.HasPrefix(s, "sample") })
		want := []string{"reload_weights /shared/w1", "reset", fmt.Sprintf("reload_weights /models/base-%d", i), "reset"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("endpoint %d: %v, want %v", i, got, want)
		}
	}
	if _, live := c.Weights(); live != "" {
		t.Errorf("live %q, want the base model (\"\")", live)
	}
}
