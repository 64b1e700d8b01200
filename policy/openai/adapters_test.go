package openai_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai"
)

// calls lists the adapter requests an endpoint received, as
// "load NAME PATH" and "unload NAME".
func calls(f *fakeVLLM) []string {
	var out []string
	for _, r := range f.Requests() {
		switch r.Path {
		case "/v1/load_lora_adapter":
			out = append(out, fmt.Sprintf("load %v %v", r.Body["lora_name"], r.Body["lora_path"]))
		case "/v1/unload_lora_adapter":
			out = append(out, fmt.Sprintf("unload %v", r.Body["lora_name"]))
		}
	}
	return out
}

// LoadAdapter loads on every endpoint; generation then names the adapter
// as its model; PruneAdapters unloads the oldest everywhere.
func TestAdapterLoadAllEndpoints(t *testing.T) {
	fs := []*fakeVLLM{newFake(t, nil), newFake(t, nil), newFake(t, nil)}
	c, _ := newClient(t, openai.Options{Model: "base"}, fs[0].URL, fs[1].URL, fs[2].URL)
	ctx := context.Background()
	for _, name := range []string{"step-1", "step-2", "step-3"} {
		if err := c.LoadAdapter(ctx, name, "/shared/ckpt/"+name); err != nil {
			t.Fatal(err)
		}
	}
	for i, f := range fs {
		want := []string{"load step-1 /shared/ckpt/step-1", "load step-2 /shared/ckpt/step-2", "load step-3 /shared/ckpt/step-3"}
		if got := calls(f); !reflect.DeepEqual(got, want) {
			t.Errorf("endpoint %d: %v, want %v", i, got, want)
		}
	}
	if got := c.Adapters(); !reflect.DeepEqual(got, []string{"step-1", "step-2", "step-3"}) {
		t.Errorf("Adapters() = %v", got)
	}
	out := generate(t, c, reqs(3), policy.Sampling{N: 1, Adapter: "step-3"})
	wantStatus(t, out, policy.StatusOK)
	if v := out[0][0].PolicyVersion; v != "base+step-3" {
		t.Errorf("policy version %q, want base+step-3", v)
	}
	for _, f := range fs {
		for _, r := range f.Requests() {
			if r.Path == "/v1/completions" && r.Body["model"] != "step-3" {
				t.Errorf("generation sent model %v, want step-3", r.Body["model"])
			}
		}
	}
	gone, err := c.PruneAdapters(ctx, 1)
	if err != nil || !reflect.DeepEqual(gone, []string{"step-1", "step-2"}) {
		t.Fatalf("PruneAdapters = %v, %v; want [step-1 step-2]", gone, err)
	}
	for i, f := range fs {
		got := calls(f)
		if want := []string{"unload step-1", "unload step-2"}; !reflect.DeepEqual(got[3:], want) {
			t.Errorf("endpoint %d: %v, want %v after the loads", i, got[3:], want)
		}
	}
	if got := c.Adapters(); !reflect.DeepEqual(got, []string{"step-3"}) {
		t.Errorf("Adapters() = %v after pruning", got)
	}
	models, err := c.Models(ctx)
	if err != nil || len(models) != 3 || models[fs[0].URL][0] != "base" {
		t.Errorf("Models = %v, %v", models, err)
	}
}

// When one endpoint refuses the adapter, the others unload it again and
// the error names the endpoint and its message; vLLM's "already loaded"
// counts as loaded; unloading what a server lacks counts as done.
func TestAdapterLoadPartialFailure(t *testing.T) {
	ok := newFake(t, nil)
	bad := newFake(t, func(k int, r seen, w http.ResponseWriter) bool {
		if r.Path == "/v1/load_lora_adapter" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"object":"error","message":"Loading lora step-1 failed: No adapter found for /ckpt/step-1","type":"BadRequestError","code":400}`)
			return true
		}
		return false
	})
	c, _ := newClient(t, openai.Options{}, ok.URL, bad.URL)
	ctx := context.Background()
	err := c.LoadAdapter(ctx, "step-1", "/ckpt/step-1")
	if err == nil || !strings.Contains(err.Error(), bad.URL+"/v1/load_lora_adapter") || !strings.Contains(err.Error(), "No adapter found") {
		t.Fatalf("err = %v, want one naming %s and the server's message", err, bad.URL)
	}
	if !errors.Is(err, openai.ErrAdapterRefused) || !errors.Is(err, policy.ErrAdapterInput) || !strings.Contains(err.Error(), "policy.adapter_root") {
		t.Errorf("err = %v: want ErrAdapterRefused (policy.ErrAdapterInput) and advice on a path the server can read", err)
	}
	if got := calls(ok); !reflect.DeepEqual(got, []string{"load step-1 /ckpt/step-1", "unload step-1"}) {
		t.Errorf("healthy endpoint: %v, want the load undone", got)
	}
	if len(c.Adapters()) != 0 {
		t.Errorf("Adapters() = %v after a failed load", c.Adapters())
	}

	bad.Set(func(k int, r seen, w http.ResponseWriter) bool {
		w.WriteHeader(http.StatusBadRequest)
		switch r.Path {
		case "/v1/load_lora_adapter":
			fmt.Fprint(w, `{"error":{"message":"The lora adapter 'step-2' has already been loaded.","type":"InvalidUserInput"}}`)
		case "/v1/unload_lora_adapter":
			fmt.Fprint(w, `{"error":{"message":"The lora adapter 'step-2' cannot be found.","type":"NotFoundError"}}`)
		}
		return true
	}, nil, nil)
	if err := c.LoadAdapter(ctx, "step-2", "/ckpt/step-2"); err != nil {
		t.Fatalf("already loaded: %v", err)
	}
	if err := c.UnloadAdapter(ctx, "step-2"); err != nil {
		t.Fatalf("unload of an absent adapter: %v", err)
	}
}

// vLLM's 500 for an adapter it cannot take (a rank above its
// --max-lora-rank) is refused at once, with the step that fixes it; a 503
// is the server's passing trouble, retried and not a refusal.
func TestAdapterRefusedBy500(t *testing.T) {
	status, msg := http.StatusInternalServerError, `{"error":{"message":"Call to add_lora method failed: Worker failed with error 'LoRA rank 16 is greater than max_lora_rank 8.', please check the stack trace above for the root cause","type":"InternalServerError","param":null,"code":500}}`
	f := newFake(t, func(k int, r seen, w http.ResponseWriter) bool {
		w.WriteHeader(status)
		fmt.Fprint(w, msg)
		return true
	})
	c, _ := newClient(t, openai.Options{Retries: 2}, f.URL)
	err := c.LoadAdapter(context.Background(), "step-3", "/ckpt/step-3")
	if !errors.Is(err, openai.ErrAdapterRefused) || !strings.Contains(err.Error(), `"step-3"`) ||
		!strings.Contains(err.Error(), "LoRA rank 16 is greater than max_lora_rank 8") || !strings.Contains(err.Error(), "restart vLLM with --max-lora-rank") {
		t.Fatalf("err = %v: want a refusal naming the adapter, the server's message and --max-lora-rank", err)
	}
	if n := len(f.Requests()); n != 1 {
		t.Errorf("%d load attempts, want 1: the same adapter gets the same answer", n)
	}

	status, msg = http.StatusServiceUnavailable, `{"error":{"message":"busy"}}`
	err = c.LoadAdapter(context.Background(), "step-4", "/ckpt/step-4")
	if err == nil || errors.Is(err, openai.ErrAdapterRefused) || !strings.Contains(err.Error(), "gave up after 3 attempts") {
		t.Fatalf("err = %v: want 3 attempts and no refusal", err)
	}
}

// Options that cannot work fail in New.
func TestNewRejects(t *testing.T) {
	for name, o := range map[string]openai.Options{
		"not a URL":  {Endpoints: []string{"127.0.0.1:8000"}},
		"query":      {Endpoints: []string{"http://h:1/v1?x=1"}},
		"twice":      {Endpoints: []string{"http://h:1", "http://h:1/v1/"}},
		"negative":   {Concurrency: -1},
		"ftp scheme": {Endpoints: []string{"ftp://h"}},
	} {
		if _, err := openai.New(&o); err == nil {
			t.Errorf("%s: New accepted %v", name, o)
		}
	}
	if _, err := openai.New(nil); err != nil {
		t.Errorf("New(nil): %v", err)
	}
}
