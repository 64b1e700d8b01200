package wire_test

import (
	"encoding/json"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai/wire"
	"github.com/rlpipe/rlpipe/policy/toolcall"
)

// TestBodies pins the bytes each client sends: the policy client's
// request (n and a seed always, 0 included) and a judge's (no n, a seed
// only when its config names one); neither changed when the two clients'
// types became one.
func TestBodies(t *testing.T) {
	seed0, seed7, k := int64(0), int64(7), 2
	tests := []struct {
		name string
		body any
		want string
	}{
		{name: "policy chat", body: wire.ChatRequest{Model: "adapter-1", Messages: []policy.Message{{Role: "user", Content: "1+1="}}, N: 4, Seed: &seed0,
			Temperature: 1, MaxTokens: 5, Logprobs: true, TopLogprobs: &k, TokensAsIDs: true, ReturnTokenIDs: true},
			want: `{"model":"adapter-1","messages":[{"role":"user","content":"1+1="}],"n":4,"seed":0,"temperature":1,"max_tokens":5,"logprobs":true,"top_logprobs":2,"return_tokens_as_token_ids":true,"return_token_ids":true}`},
		{name: "policy completion", body: wire.CompletionRequest{Prompt: "1+1=", N: 1, Seed: &seed7, Temperature: 0, Stop: []string{"\n"}, Logprobs: 1, ReturnTokenIDs: true},
			want: `{"prompt":"1+1=","n":1,"seed":7,"temperature":0,"stop":["\n"],"logprobs":1,"return_token_ids":true}`},
		{name: "policy chat with tools", body: wire.ChatRequest{Messages: []policy.Message{{Role: "user", Content: "ls"},
			{Role: "assistant", Content: "", ToolCalls: []toolcall.Call{{ID: "call_0_0", Name: "bash", Arguments: `{"cmd":"ls"}`}}},
			{Role: "tool", Content: "a.txt", ToolCallID: "call_0_0"}}, Seed: &seed0, Temperature: 1,
			Tools: []toolcall.Tool{{Type: "function", Function: toolcall.Function{Name: "bash", Parameters: json.RawMessage(`{"type":"object"}`)}}}, ToolChoice: "auto"},
			want: `{"messages":[{"role":"user","content":"ls"},{"role":"assistant","content":"","tool_calls":[{"id":"call_0_0","type":"function","function":{"name":"bash","arguments":"{\"cmd\":\"ls\"}"}}]},{"role":"tool","content":"a.txt","tool_call_id":"call_0_0"}],"seed":0,"temperature":1,"tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}],"tool_choice":"auto"}`},
		{name: "judge without seed", body: wire.ChatRequest{Model: "gpt-4o-mini", Messages: []policy.Message{{Role: "user", Content: "Score: ?"}}},
			want: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Score: ?"}],"temperature":0}`},
		{name: "judge with seed and max tokens", body: wire.ChatRequest{Model: "m", Messages: []policy.Message{{Role: "user", Content: "x"}}, Seed: &seed7, Temperature: 0.5, MaxTokens: 64},
			want: `{"model":"m","messages":[{"role":"user","content":"x"}],"seed":7,"temperature":0.5,"max_tokens":64}`},
	}
	for _, tc := range tests {
		b, err := json.Marshal(tc.body)
		if got := string(b); err != nil || got != tc.want {
			t.Errorf("%s: body %s (%v), want %s", tc.name, got, err, tc.want)
		}
	}
}

func TestAPIErrorText(t *testing.T) {
	tests := []struct{ name, body, msg, typ string }{
		{name: "openai", body: `{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}`, msg: "quota", typ: "insufficient_quota"},
		{name: "vllm flat", body: `{"object":"error","message":"no such model","type":"NotFoundError"}`, msg: "no such model", typ: "NotFoundError"},
		{name: "neither", body: `{}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e wire.APIError
			if err := json.Unmarshal([]byte(tc.body), &e); err != nil {
				t.Fatal(err)
			}
			if msg, typ := e.Text(); msg != tc.msg || typ != tc.typ {
				t.Errorf("Text() = %q, %q, want %q, %q", msg, typ, tc.msg, tc.typ)
			}
		})
	}
}
