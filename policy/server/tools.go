package server

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/toolcall"
)

// Tool calls. A chat request's tools go to the policy in
// policy.Request.Tools, for a policy that shows them to its model (one
// with a chat template; the tiny model has none and knows its tools from
// training). With tools offered and tool_choice auto (the default), each
// choice's text is read with toolcall.Parse, as vLLM's hermes parser
// reads it: calls found become message.tool_calls, the text before them
// the content (null when empty), and the finish reason "tool_calls". A
// reply whose calls are malformed stays content, as in vLLM, so the
// client's environment can answer the mistake. tool_choice none offers
// the tools and parses nothing; "required" and a named function are
// refused, since this server cannot force the model to call.

// toolChoice reads tool_choice: "" (absent or null), "auto" or "none".
func toolChoice(raw json.RawMessage, tools []toolcall.Tool) (string, *apiError) {
	raw = bytes.TrimSpace(raw)
	choice := ""
	if len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		if err := json.Unmarshal(raw, &choice); err != nil {
			return "", badRequest("tool_choice", "tool_choice %s is not supported: this server cannot force a call to a named function; send \"auto\" (the model decides) or \"none\"", raw)
		}
		switch choice {
		case "auto", "none":
		case "required":
			return "", badRequest("tool_choice", "tool_choice \"required\" is not supported: this server cannot force the model to call a tool; send \"auto\" (the model decides) or \"none\"")
		default:
			return "", badRequest("tool_choice", "tool_choice is %q; it must be \"auto\" or \"none\"", choice)
		}
	}
	if choice == "auto" && len(tools) == 0 {
		return "", badRequest("tool_choice", "tool_choice \"auto\" needs tools: send the tools the model may call")
	}
	for i, t := range tools {
		if t.Type != "function" || t.Function.Name == "" {
			return "", badRequest("tools", "tools[%d] is not {\"type\": \"function\", \"function\": {\"name\": …, \"parameters\": {…}}}", i)
		}
	}
	return choice, nil
}

// toolMessage returns the message of a chat choice whose text is text:
// with calls parsed when the request asked (c.parseCalls), their ids
// derived from the request's seed and the choice's index.
func toolMessage(text string, c *call, index int) (*message, bool) {
	m := &message{Role: "assistant", Content: &text}
	if !c.parseCalls {
		return m, false
	}
	content, calls, err := toolcall.Parse(text)
	if err != nil || len(calls) == 0 {
		return m, false
	}
	for k := range calls {
		calls[k].ID = callID(c.reqs[0].Seed, index, k)
	}
	m.ToolCalls = toolcall.ToWire(calls)
	if content == "" {
		m.Content = nil
	} else {
		m.Content = &content
	}
	return m, true
}

// callID names call k of choice index: the same seed names the same
// calls, so a replayed episode's transcript is the same.
func callID(seed int64, index, k int) string {
	return fmt.Sprintf("call_%016x", policy.SampleSeed(int64(policy.SampleSeed(seed, index)), k))
}

// streamCall is a call in a stream's delta, OpenAI's shape with its index.
type streamCall struct {
	Index int `json:"index"`
	toolcall.Wire
}

// withCalls cuts a streamed choice with tool calls: the parts of its
// content as they are (the one that crosses the content's end cut
// there), then one part, with the calls, for the rest of its tokens and
// logprobs.
func withCalls(ps []part, content *string, calls []toolcall.Wire) []part {
	n := 0
	if content != nil {
		n = len(*content)
	}
	var out []part
	at := 0
	k := 0
	for ; k < len(ps) && at < n; k++ {
		p := ps[k]
		if at+len(p.text) > n {
			p.text = p.text[:n-at]
		}
		at += len(p.text)
		out = append(out, p)
	}
	rest := part{pos0: ps[len(ps)-1].pos1, pos1: ps[len(ps)-1].pos1, id0: ps[len(ps)-1].id1, id1: ps[len(ps)-1].id1}
	if k < len(ps) {
		rest.pos0, rest.id0 = ps[k].pos0, ps[k].id0
	}
	rest.calls = make([]streamCall, len(calls))
	for i, w := range calls {
		rest.calls[i] = streamCall{Index: i, Wire: w}
	}
	return append(out, rest)
}
