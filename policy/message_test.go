package policy_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/toolcall"
)

// A message without tool calls encodes as it did before Message had
// them, escaped or not as its caller asks; one with calls is OpenAI's
// shape and reads back the same.
func TestMessageJSON(t *testing.T) {
	for _, tc := range []struct {
		name           string
		msg            policy.Message
		escaped, plain string
	}{
		{"plain", policy.Message{Role: "user", Content: "1<2 & 3>2"},
			`{"role":"user","content":"1\u003c2 \u0026 3\u003e2"}`, `{"role":"user","content":"1<2 & 3>2"}`},
		{"calls", policy.Message{Role: "assistant", ToolCalls: []toolcall.Call{{ID: "call_0_0", Name: "bash", Arguments: `{"cmd":"ls"}`}}},
			`{"role":"assistant","content":"","tool_calls":[{"id":"call_0_0","type":"function","function":{"name":"bash","arguments":"{\"cmd\":\"ls\"}"}}]}`, ""},
		{"tool answer", policy.Message{Role: "tool", Content: "a.txt", ToolCallID: "call_0_0"},
			`{"role":"tool","content":"a.txt","tool_call_id":"call_0_0"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.msg)
			if err != nil || string(b) != tc.escaped {
				t.Fatalf("Marshal = %s (%v), want %s", b, err, tc.escaped)
			}
			if tc.plain != "" {
				var buf bytes.Buffer
				enc := json.NewEncoder(&buf)
				enc.SetEscapeHTML(false)
				enc.Encode(tc.msg)
				if got := string(bytes.TrimSpace(buf.Bytes())); got != tc.plain {
					t.Errorf("unescaped = %s, want %s", got, tc.plain)
				}
			}
			var back policy.Message
			if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, tc.msg) {
				t.Errorf("read back %+v (%v), want %+v", back, err, tc.msg)
			}
		})
	}
	var m policy.Message
	if err := json.Unmarshal([]byte(`{"role":"assistant","content":null,"tool_calls":[{"id":"x","type":"function","function":{"name":"submit","arguments":"{}"}}]}`), &m); err != nil ||
		m.Content != "" || len(m.ToolCalls) != 1 || m.Text() != "<tool_call>\n{\"name\": \"submit\", \"arguments\": {}}\n</tool_call>" {
		t.Errorf("content null: %+v (%v), text %q", m, err, m.Text())
	}
}

func TestValidateTools(t *testing.T) {
	tools := []toolcall.Tool{{Type: "function", Function: toolcall.Function{Name: "bash"}}}
	for _, tc := range []struct {
		name string
		req  policy.Request
		want string
	}{
		{"tools with a prompt", policy.Request{ID: "a", Prompt: "x", Tools: tools}, `request 0 ("a"): tools are offered in a chat request: send messages, not a prompt`},
		{"unknown tool_choice", policy.Request{ID: "b", Messages: []policy.Message{{Role: "user", Content: "x"}}, Tools: tools, ToolChoice: "always"},
			`request 0 ("b"): tool_choice is "always"; it must be auto, none or required`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := policy.Validate([]policy.Request{tc.req}, policy.Sampling{}); err == nil || err.Error() != tc.want {
				t.Errorf("Validate = %v, want %s", err, tc.want)
			}
		})
	}
}
