package openai_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai"
	"github.com/rlpipe/rlpipe/policy/toolcall"
)

var bashTool = toolcall.Tool{Type: "function", Function: toolcall.Function{Name: "bash", Description: "Run a command",
	Parameters: json.RawMessage(`{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}`)}}

// A chat request offers its tools and sends a transcript's calls and tool
// answers in OpenAI's shapes; vLLM's answer (content null, tool_calls
// with re-serialized arguments, finish_reason tool_calls) becomes a
// sample whose ToolCalls hold the calls and whose TokenIDs are the tokens
// the server sampled, not a re-rendering.
func TestToolCalls(t *testing.T) {
	f := newFake(t, func(k int, r seen, w http.ResponseWriter) bool {
		writeJSON(w, map[string]any{"prompt_token_ids": []int{1, 2},
			"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "token_ids": []int{50, 51, 52},
				"message": map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
					map[string]any{"id": "chatcmpl-tool-0123456789abcdef", "type": "function",
						"function": map[string]any{"name": "bash", "arguments": `{"cmd": "ls"}`}}}}}}})
		return true
	})
	c, _ := newClient(t, openai.Options{}, f.URL)
	msgs := []policy.Message{
		{Role: "user", Content: "List files."},
		{Role: "assistant", ToolCalls: []toolcall.Call{{ID: "call_0_0", Name: "bash", Arguments: `{"cmd":"pwd"}`}}},
		{Role: "tool", Content: "/work", ToolCallID: "call_0_0"},
	}
	out := generate(t, c, []policy.Request{{ID: "t", Messages: msgs, Tools: []toolcall.Tool{bashTool}, ToolChoice: "auto"}}, policy.Sampling{N: 1})
	s := out[0][0]
	want := []toolcall.Call{{ID: "chatcmpl-tool-0123456789abcdef", Name: "bash", Arguments: `{"cmd": "ls"}`}}
	if s.Status != policy.StatusOK || s.Text != "" || s.FinishReason != "tool_calls" || !slices.Equal(s.ToolCalls, want) || !slices.Equal(s.TokenIDs, []int32{50, 51, 52}) {
		t.Errorf("sample: status %s, text %q, finish %q, calls %+v, tokens %v", s.Status, s.Text, s.FinishReason, s.ToolCalls, s.TokenIDs)
	}
	body := f.Requests()[0].Body
	for _, tc := range []struct{ field, want string }{
		{"tools", `[{"function":{"description":"Run a command","name":"bash","parameters":{"properties":{"cmd":{"type":"string"}},"required":["cmd"],"type":"object"}},"type":"function"}]`},
		{"tool_choice", `"auto"`},
		{"messages", `[{"content":"List files.","role":"user"},{"content":"","role":"assistant","tool_calls":[{"function":{"arguments":"{\"cmd\":\"pwd\"}","name":"bash"},"id":"call_0_0","type":"function"}]},{"content":"/work","role":"tool","tool_call_id":"call_0_0"}]`},
	} {
		got, _ := json.Marshal(body[tc.field])
		if string(got) != tc.want {
			t.Errorf("request %s = %s\nwant %s", tc.field, got, tc.want)
		}
	}
}
