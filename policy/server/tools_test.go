package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai"
	"github.com/rlpipe/rlpipe/policy/server"
	"github.com/rlpipe/rlpipe/policy/toolcall"
)

// echoPolicy replies with its last message's content, one token per byte
// (the byte's value), and keeps the tools of the requests it served.
type echoPolicy struct {
	mu    sync.Mutex
	tools [][]toolcall.Tool
}

func (p *echoPolicy) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	out := make([][]policy.Sample, len(reqs))
	for i, r := range reqs {
		p.mu.Lock()
		p.tools = append(p.tools, r.Tools)
		p.mu.Unlock()
		text := r.Prompt
		if len(r.Messages) > 0 {
			text = r.Messages[len(r.Messages)-1].Content
		}
		ids := make([]int32, len(text))
		lps := make([]float32, len(text))
		for k := range text {
			ids[k], lps[k] = int32(text[k]), -0.5
		}
		for j := range s.Samples() {
			out[i] = append(out[i], policy.Sample{RequestID: r.ID, Index: j, Text: text, TokenIDs: ids, Logprobs: lps,
				PromptTokens: 3, FinishReason: policy.FinishStop, PolicyVersion: "echo", Status: policy.StatusOK})
		}
	}
	return out, nil
}

func (*echoPolicy) TokenText(id int32) string { return string(rune(id)) }

const (
	callReply   = "I will look.\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"cmd\": \"ls\"}}\n</tool_call>"
	onlyCall    = "<tool_call>\n{\"name\": \"submit\", \"arguments\": {}}\n</tool_call>"
	brokenReply = "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"cmd\": \n</tool_call>"
	toolsJSON   = `[{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}}, {"type": "function", "function": {"name": "submit", "parameters": {"type": "object", "properties": {}}}}]`
)

func chatBody(reply, extra string) string {
	b, _ := json.Marshal(reply)
	return `{"messages": [{"role": "user", "content": ` + string(b) + `}], "seed": 5, "return_token_ids": true` + extra + `}`
}

// With tools offered, a choice's Hermes calls come back as tool_calls
// (OpenAI's shape, ids from the seed), the text before them as content
// (null when none) and finish_reason "tool_calls"; token_ids stay every
// token sampled. Without tools, with tool_choice none, or with a
// malformed call, the text stays content, as vLLM answers.
func TestToolCallsAnswered(t *testing.T) {
	p := &echoPolicy{}
	url, _ := serve(t, p, &server.Options{Model: "echo"})
	tools := `, "tools": ` + toolsJSON
	for _, tc := range []struct {
		name, body string
		content    any
		calls      string
		finish     string
	}{
		{"content and a call", chatBody(callReply, tools), "I will look.",
			`[{"function":{"arguments":"{\"cmd\":\"ls\"}","name":"bash"},"id":"` + callID(5, 0, 0) + `","type":"function"}]`, "tool_calls"},
		{"a call only: content null", chatBody(onlyCall, tools+`, "tool_choice": "auto"`), nil,
			`[{"function":{"arguments":"{}","name":"submit"},"id":"` + callID(5, 0, 0) + `","type":"function"}]`, "tool_calls"},
		{"no tools: the text", chatBody(callReply, ""), callReply, "null", "stop"},
		{"tool_choice none: the text", chatBody(callReply, tools+`, "tool_choice": "none"`), callReply, "null", "stop"},
		{"malformed call stays content", chatBody(brokenReply, tools), brokenReply, "null", "stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, m := do(t, "POST", url+"/v1/chat/completions", tc.body)
			if status != 200 {
				t.Fatalf("status %d: %v", status, m)
			}
			ch := m["choices"].([]any)[0].(map[string]any)
			msg := ch["message"].(map[string]any)
			calls, _ := json.Marshal(msg["tool_calls"])
			if msg["content"] != tc.content || string(calls) != tc.calls || ch["finish_reason"] != tc.finish {
				t.Errorf("content %#v, tool_calls %s, finish %v\nwant %#v, %s, %s", msg["content"], calls, ch["finish_reason"], tc.content, tc.calls, tc.finish)
			}
			reply := tc.body[strings.Index(tc.body, `"content": `)+11 : strings.Index(tc.body, `}], "seed"`)]
			var text string
			json.Unmarshal([]byte(reply), &text)
			if ids := ch["token_ids"].([]any); len(ids) != len(text) {
				t.Errorf("%d token ids, want the %d sampled", len(ids), len(text))
			}
		})
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.tools[0]) != 2 || p.tools[0][1].Function.Name != "submit" || p.tools[2] != nil {
		t.Errorf("the policy was offered %+v", p.tools)
	}
}

// callID is the server's id of call k of choice index for seed (tools.go).
func callID(seed int64, index, k int) string {
	return fmt.Sprintf("call_%016x", policy.SampleSeed(int64(policy.SampleSeed(seed, index)), k))
}

// Bad tools and tool_choice are a 400 that names the field and the fix.
func TestToolRequestsRefused(t *testing.T) {
	url, _ := serve(t, &echoPolicy{}, &server.Options{Model: "echo"})
	tools := `, "tools": ` + toolsJSON
	for _, tc := range []struct{ name, extra, param, msg string }{
		{"required", tools + `, "tool_choice": "required"`, "tool_choice",
			`tool_choice "required" is not supported: this server cannot force the model to call a tool; send "auto" (the model decides) or "none"`},
		{"named function", tools + `, "tool_choice": {"type": "function", "function": {"name": "bash"}}`, "tool_choice",
			`tool_choice {"type": "function", "function": {"name": "bash"}} is not supported: this server cannot force a call to a named function; send "auto" (the model decides) or "none"`},
		{"unknown choice", tools + `, "tool_choice": "always"`, "tool_choice", `tool_choice is "always"; it must be "auto" or "none"`},
		{"auto without tools", `, "tool_choice": "auto"`, "tool_choice", `tool_choice "auto" needs tools: send the tools the model may call`},
		{"tool without a name", `, "tools": [{"type": "function", "function": {"parameters": {}}}]`, "tools",
			`tools[0] is not {"type": "function", "function": {"name": …, "parameters": {…}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, m := do(t, "POST", url+"/v1/chat/completions", chatBody(callReply, tc.extra))
			e := apiErr(t, m)
			if status != 400 || e["param"] != tc.param || e["message"] != tc.msg {
				t.Errorf("%d %v\nwant 400 %s: %s", status, e, tc.param, tc.msg)
			}
		})
	}
}

// A stream of a choice with calls carries its content token by token,
// then one chunk with the calls, the rest of the token ids and
// finish_reason "tool_calls": together the non-stream answer.
func TestToolCallsStreamed(t *testing.T) {
	url, _ := serve(t, &echoPolicy{}, &server.Options{Model: "echo"})
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(chatBody(callReply, `, "stream": true, "logprobs": true, "tools": `+toolsJSON)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var content strings.Builder
	var calls []any
	var finish []any
	ids, lps := 0, 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ck struct {
			Choices []struct {
				Delta struct {
					Content   *string
					ToolCalls []any `json:"tool_calls"`
				}
				Logprobs     *struct{ Content []any }
				FinishReason any   `json:"finish_reason"`
				TokenIDs     []int `json:"token_ids"`
			}
		}
		if err := json.Unmarshal([]byte(data), &ck); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		c := ck.Choices[0]
		if c.Delta.Content != nil {
			content.WriteString(*c.Delta.Content)
		}
		calls = append(calls, c.Delta.ToolCalls...)
		ids += len(c.TokenIDs)
		if c.Logprobs != nil {
			lps += len(c.Logprobs.Content)
		}
		if c.FinishReason != nil {
			finish = append(finish, c.FinishReason)
		}
	}
	got, _ := json.Marshal(calls)
	want := `[{"function":{"arguments":"{\"cmd\":\"ls\"}","name":"bash"},"id":"` + callID(5, 0, 0) + `","index":0,"type":"function"}]`
	if content.String() != "I will look." || string(got) != want || !slices.Equal(finish, []any{"tool_calls"}) || ids != len(callReply) || lps != len(callReply) {
		t.Errorf("stream: content %q, calls %s, finish %v, %d token ids and %d logprobs\nwant %q, %s, [tool_calls], %d", content.String(), got, finish, ids, lps, "I will look.", want, len(callReply))
	}
}

// rlpipe's client reads the calls of rlpipe's server into
// Sample.ToolCalls, with the text before them as Text and every sampled
// token in TokenIDs.
func TestToolCallsThroughTheClient(t *testing.T) {
	url, _ := serve(t, &echoPolicy{}, &server.Options{Model: "echo"})
	c, err := openai.New(&openai.Options{Endpoints: []string{url}, Model: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var tools []toolcall.Tool
	if err := json.Unmarshal([]byte(toolsJSON), &tools); err != nil {
		t.Fatal(err)
	}
	out, err := c.Generate(context.Background(), []policy.Request{{ID: "r", Seed: 5, Tools: tools,
		Messages: []policy.Message{{Role: "user", Content: callReply}}}}, policy.Sampling{Temperature: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := out[0][0]
	want := []toolcall.Call{{ID: callID(5, 0, 0), Name: "bash", Arguments: `{"cmd":"ls"}`}}
	if s.Status != policy.StatusOK || s.Text != "I will look." || !slices.Equal(s.ToolCalls, want) || s.FinishReason != "tool_calls" || len(s.TokenIDs) != len(callReply) {
		t.Errorf("sample %+v", s)
	}
}
