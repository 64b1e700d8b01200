package openai_test

import (
	"reflect"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai"
)

// A request of prompt token ids goes to /v1/completions with the ids as
// its prompt, as vLLM takes them — even from a client that sends plain
// prompts to chat — and one that also sets messages is refused before
// anything is sent.
func TestPromptAsTokenIDs(t *testing.T) {
	f := newFake(t, nil)
	c, _ := newClient(t, openai.Options{Chat: true}, f.URL+"/v1/")
	out := generate(t, c, []policy.Request{{ID: "t", PromptTokenIDs: []int32{5, 6, 7}, Seed: 1}}, policy.Sampling{N: 1, Temperature: 1})
	wantStatus(t, out, policy.StatusOK)
	got := f.Requests()
	if len(got) != 1 || got[0].Path != "/v1/completions" || !reflect.DeepEqual(got[0].Body["prompt"], []any{5.0, 6.0, 7.0}) {
		t.Fatalf("requests %+v, want one to /v1/completions with prompt [5 6 7]", got)
	}
	out = generate(t, c, []policy.Request{{ID: "both", PromptTokenIDs: []int32{5}, Messages: []policy.Message{{Role: "user", Content: "x"}}}}, policy.Sampling{N: 1})
	if s := out[0][0]; s.Status != policy.StatusInvalid || s.Error != `request "both": set prompt token ids alone, without a prompt or messages` {
		t.Errorf("both: %s %q", s.Status, s.Error)
	}
	if n := len(f.Requests()); n != 1 {
		t.Errorf("%d requests sent, want the first only", n)
	}
}
