package environments

import (
	"encoding/json"
	"fmt"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/toolcall"
)

// ToolOffer is implemented by environments that offer the policy tools in
// the function-calling format. The runner asks after Reset and puts the
// tools in every request of the episode (policy.Request.Tools); nil
// offers none, and the episode runs as for any Env.
//
// The env's Step still receives the policy's whole reply as text: the
// calls as Hermes <tool_call> blocks after the content, as a Qwen or
// Hermes model writes them, parsed with toolcall.Parse. When the policy
// returned its calls apart from its text (Sample.ToolCalls: vLLM with a
// tool-call parser, rlpipe policy serve), the runner hands the env
// toolcall.Join(content, calls), the same text. A Step that answers each
// call, Step.ToolResults with one result per call in order, makes the
// reply a structured turn: the assistant message carries the calls (ids
// call_<turn>_<k>) and each result comes back as a message of role
// "tool" with that call's tool_call_id; an Observation then follows as
// an ordinary observation. Otherwise (no calls, a malformed call the env
// answers with feedback and nil ToolResults) the reply stays text and the
// Observation is the next observation, as always. ToolResults not nil and
// not one per call end the episode env_error, naming both counts.
type ToolOffer interface {
	Tools() []toolcall.Tool
}

// toolCallsOf reads a reply of a policy offered tools: its content and
// calls (from Sample.ToolCalls, else parsed from the text; a malformed
// call leaves the text whole as content, for the env to answer), each
// call named call_<turn>_<k>. Without tools it is the text, no calls.
func toolCallsOf(s policy.Sample, tools []toolcall.Tool, turn int) (content string, calls []toolcall.Call) {
	content, calls = s.Text, s.ToolCalls
	if len(tools) == 0 {
		return content, nil
	}
	if len(calls) == 0 {
		c, parsed, err := toolcall.Parse(s.Text)
		if err != nil || len(parsed) == 0 {
			return s.Text, nil
		}
		content, calls = c, parsed
	}
	calls = append([]toolcall.Call(nil), calls...)
	for k := range calls {
		calls[k].ID = fmt.Sprintf("call_%d_%d", turn, k)
	}
	return content, calls
}

// callsJSON is calls as a turn's tool_calls column: OpenAI's tool_calls
// array (toolcall.Wire).
func callsJSON(calls []toolcall.Call) (string, error) {
	b, err := json.Marshal(toolcall.ToWire(calls))
	if err != nil {
		return "", fmt.Errorf("encode the tool calls: %w", err)
	}
	return string(b), nil
}
