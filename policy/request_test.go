package policy_test

import (
	"errors"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/toolcall"
)

// A request is a prompt, messages or prompt token ids: exactly one of
// them; Validate reports the first that is not, as ErrRequest.
func TestRequestCheck(t *testing.T) {
	msgs := []policy.Message{{Role: "user", Content: "hi"}}
	for _, c := range []struct {
		name string
		r    policy.Request
		want string
	}{
		{name: "prompt", r: policy.Request{ID: "a", Prompt: "1+1="}},
		{name: "messages", r: policy.Request{ID: "a", Messages: msgs}},
		{name: "token ids", r: policy.Request{ID: "a", PromptTokenIDs: []int32{5, 6}}},
		{name: "prompt and messages", r: policy.Request{ID: "a", Prompt: "1+1=", Messages: msgs},
			want: `request "a": set prompt or messages, not both`},
		{name: "token ids and messages", r: policy.Request{ID: "a", Messages: msgs, PromptTokenIDs: []int32{5}},
			want: `request "a": set prompt token ids alone, without a prompt or messages`},
		{name: "token ids and prompt", r: policy.Request{ID: "a", Prompt: "x", PromptTokenIDs: []int32{5}},
			want: `request "a": set prompt token ids alone, without a prompt or messages`},
		{name: "empty token ids", r: policy.Request{ID: "a", PromptTokenIDs: []int32{}},
			want: `request "a": prompt token ids are empty; send at least one token`},
		{name: "token ids and tools", r: policy.Request{ID: "a", PromptTokenIDs: []int32{5}, Tools: []toolcall.Tool{{Type: "function", Function: toolcall.Function{Name: "add"}}}},
			want: `request "a": tools are offered beside prompt token ids, which no policy reads: render the tools into the token ids (an environments.Renderer does at the first turn) and send none`},
		{name: "token ids and tool choice", r: policy.Request{ID: "a", PromptTokenIDs: []int32{5}, ToolChoice: "auto"},
			want: `request "a": tools are offered beside prompt token ids, which no policy reads: render the tools into the token ids (an environments.Renderer does at the first turn) and send none`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := policy.Validate([]policy.Request{{ID: "ok", Prompt: "x"}, c.r}, policy.Sampling{})
			if c.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				return
			}
			if err == nil || err.Error() != c.want || !errors.Is(err, policy.ErrRequest) {
				t.Fatalf("Validate = %v, want %q (ErrRequest)", err, c.want)
			}
		})
	}
}
