package environments_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/toolcall"
)

// calc offers add {a, b} and answer {value}: a reply's calls are run in
// order, each answered; answer ends the episode, reward 1 for 5. A
// malformed reply or a call the tools refuse is answered as feedback.
type calc struct{ actions []string }

var calcTools = []toolcall.Tool{
	{Type: "function", Function: toolcall.Function{Name: "add", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}`)}},
	{Type: "function", Function: toolcall.Function{Name: "answer", Parameters: json.RawMessage(`{"type":"object","properties":{"value":{"type":"integer"}},"required":["value"]}`)}},
}

func (*calc) Tools() []toolcall.Tool                        { return calcTools }
func (*calc) Reset(context.Context, string) (string, error) { return "What is 2+3?", nil }
func (*calc) End() error                                    { return nil }

func (c *calc) Step(_ context.Context, action string) (environments.Step, error) {
	c.actions = append(c.actions, action)
	_, calls, err := toolcall.Parse(action)
	if err != nil {
		return environments.Step{Observation: err.Error()}, nil
	}
	if len(calls) == 0 {
		return environments.Step{Observation: "call a tool"}, nil
	}
	var results []string
	for _, call := range calls {
		if err := toolcall.Check(calcTools, call); err != nil {
			results = append(results, err.Error())
			continue
		}
		var args struct{ A, B, Value int }
		json.Unmarshal([]byte(call.Arguments), &args)
		if call.Name == "answer" {
			r := 0.0
			if args.Value == 5 {
				r = 1
			}
			return environments.Step{Observation: "answered " + strconv.Itoa(args.Value), Reward: r, Done: true, ToolResults: append(results, "ok")}, nil
		}
		results = append(results, strconv.Itoa(args.A+args.B))
	}
	return environments.Step{ToolResults: results}, nil
}

// toolPolicy replies with its script, turn by turn, as text or (split)
// as content and Sample.ToolCalls, one token per byte; it keeps what it
// was asked.
type toolPolicy struct {
	script []string
	split  bool

	mu   sync.Mutex
	reqs []policy.Request
}

func (p *toolPolicy) Generate(_ context.Context, reqs []policy.Request, _ policy.Sampling) ([][]policy.Sample, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := reqs[0]
	turn := len(p.reqs)
	p.reqs = append(p.reqs, r)
	text := p.script[turn]
	ids := make([]int32, len(text))
	for k := range text {
		ids[k] = int32(text[k])
	}
	s := policy.Sample{RequestID: r.ID, Text: text, TokenIDs: ids, FinishReason: policy.FinishStop, Status: policy.StatusOK, PolicyVersion: "script"}
	if p.split {
		if content, calls, err := toolcall.Parse(text); err == nil && calls != nil {
			for k := range calls {
				calls[k].ID = fmt.Sprintf("srv-%d", k)
			}
			s.Text, s.ToolCalls, s.FinishReason = content, calls, "tool_calls"
		}
	}
	return [][]policy.Sample{{s}}, nil
}

// An env that offers tools gets them in every request; each call of a
// reply is answered with a tool message naming its call, the assistant
// turn records the calls in OpenAI's shape and keeps the reply's tokens,
// and a malformed call is answered as an ordinary observation. A policy
// that returns its calls apart (Sample.ToolCalls) gives the env the same
// text and the trajectory the same turns.
func TestToolCallEpisode(t *testing.T) {
	script := []string{
		"Let me add.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}\n</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2}}\n</tool_call>",
		"<tool_call>\n{\"name\": \"answer\", \"arguments\": {\"value\": 5\n</tool_call>",
		"<tool_call>\n{\"name\": \"answer\", \"arguments\": {\"value\":5}}\n</tool_call>",
	}
	wantCalls := []string{
		`[{"id":"call_0_0","type":"function","function":{"name":"add","arguments":"{\"a\":2,\"b\":3}"}},{"id":"call_0_1","type":"function","function":{"name":"add","arguments":"{\"a\":2}"}}]`,
		"",
		`[{"id":"call_2_0","type":"function","function":{"name":"answer","arguments":"{\"value\":5}"}}]`,
	}
	malformed := `malformed tool call: call 1: want a JSON object {"name": …, "arguments": {…}}: unexpected EOF`
	want := []struct{ role, content, calls string }{
		{"user", "What is 2+3?", ""},
		{"assistant", "Let me add.", wantCalls[0]},
		{"tool", "5", ""},
		{"tool", `tool call does not match the tools offered: add needs the argument "b"`, ""},
		{"assistant", script[1], ""},
		{"user", malformed, ""},
		{"assistant", "", wantCalls[2]},
		{"tool", "ok", ""},
		{"user", "answered 5", ""},
	}
	for _, split := range []bool{false, true} {
		t.Run(fmt.Sprintf("calls apart from the text %v", split), func(t *testing.T) {
			p := &toolPolicy{script: script, split: split}
			env := &calc{}
			res, err := newRunner(t, p, nil).Run(context.Background(), env, environments.Episode{ID: "calc-1"})
			if err != nil {
				t.Fatal(err)
			}
			tr := res.Trajectory
			if tr.Status != tables.StatusOK || res.Reward != 1 {
				t.Fatalf("status %s (%v), reward %v", tr.Status, tr.Error, res.Reward)
			}
			if len(tr.Turns) != len(want) {
				t.Fatalf("%d turns, want %d: %+v", len(tr.Turns), len(want), tr.Turns)
			}
			for i, w := range want {
				tu := tr.Turns[i]
				calls := ""
				if tu.ToolCalls != nil {
					calls = *tu.ToolCalls
				}
				if tu.Role != w.role || tu.Content != w.content || calls != w.calls {
					t.Errorf("turn %d: %s %q %s\nwant %s %q %s", i, tu.Role, tu.Content, calls, w.role, w.content, w.calls)
				}
			}
			// The env read the replies as text; the trajectory holds the
			// tokens sampled.
			wantActions := []string{script[0], script[1], script[2]}
			if split {
				// Rewritten by toolcall.Join from the parsed (compacted) calls.
				wantActions[0] = "Let me add.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\":2,\"b\":3}}\n</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\":2}}\n</tool_call>"
			}
			if strings.Join(env.actions, "|") != strings.Join(wantActions, "|") {
				t.Errorf("the env was given %q\nwant %q", env.actions, wantActions)
			}
			if n := len(script[0]) + len(script[1]) + len(script[2]); len(tr.TokenIDs) != n || len(tr.Turns[1].TokenIDs) != len(script[0]) {
				t.Errorf("%d token ids (%d in the first reply), want %d (%d)", len(tr.TokenIDs), len(tr.Turns[1].TokenIDs), n, len(script[0]))
			}
			// What the policy was sent: the tools every turn, and the
			// third request's transcript with the calls and their answers.
			for i, r := range p.reqs {
				if len(r.Tools) != 2 {
					t.Errorf("request %d offered %d tools, want 2", i, len(r.Tools))
				}
			}
			var buf strings.Builder
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.Encode(p.reqs[2].Messages)
			got := strings.TrimSuffix(buf.String(), "\n")
			wantMsgs := `[{"role":"user","content":"What is 2+3?"},` +
				`{"role":"assistant","content":"Let me add.","tool_calls":[{"id":"call_0_0","type":"function","function":{"name":"add","arguments":"{\"a\":2,\"b\":3}"}},{"id":"call_0_1","type":"function","function":{"name":"add","arguments":"{\"a\":2}"}}]},` +
				`{"role":"tool","content":"5","tool_call_id":"call_0_0"},` +
				`{"role":"tool","content":"tool call does not match the tools offered: add needs the argument \"b\"","tool_call_id":"call_0_1"},` +
				`{"role":"assistant","content":` + strconv.Quote(script[1]) + `},` +
				`{"role":"user","content":` + strconv.Quote(malformed) + `}]`
			if got != wantMsgs {
				t.Errorf("third request's messages\n%s\nwant\n%s", got, wantMsgs)
			}
		})
	}
}

// shortAnswer answers every reply with results, whatever its calls.
type shortAnswer struct{ results []string }

func (*shortAnswer) Tools() []toolcall.Tool                        { return calcTools }
func (*shortAnswer) Reset(context.Context, string) (string, error) { return "What is 2+3?", nil }
func (*shortAnswer) End() error                                    { return nil }
func (s *shortAnswer) Step(context.Context, string) (environments.Step, error) {
	return environments.Step{ToolResults: s.results, Observation: "more"}, nil
}

// An env whose tool results do not answer the reply's calls one for one
// ends the episode env_error naming both counts: the results are neither
// dropped nor sent as an empty observation.
func TestToolResultsMismatch(t *testing.T) {
	twoCalls := "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}\n</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 1}}\n</tool_call>"
	for _, c := range []struct {
		name    string
		reply   string
		results []string
		want    string
	}{
		{name: "fewer results than calls", reply: twoCalls, results: []string{"5"},
			want: "step 0: the environment returned 1 tool results for the 2 tool calls of the reply: an environment offering tools answers each call in order (Step.ToolResults), or returns none and an observation"},
		{name: "results for a reply without calls", reply: "five", results: []string{"5", "2"},
			want: "step 0: the environment returned 2 tool results for the 0 tool calls of the reply: an environment offering tools answers each call in order (Step.ToolResults), or returns none and an observation"},
		{name: "no result for two calls", reply: twoCalls, results: []string{},
			want: "step 0: the environment returned 0 tool results for the 2 tool calls of the reply: an environment offering tools answers each call in order (Step.ToolResults), or returns none and an observation"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &toolPolicy{script: []string{c.reply, c.reply}}
			res, err := newRunner(t, p, nil).Run(context.Background(), &shortAnswer{results: c.results}, environments.Episode{ID: "short-1"})
			if err != nil {
				t.Fatal(err)
			}
			tr := res.Trajectory
			if tr.Status != tables.StatusEnvError || tr.Error == nil || *tr.Error != c.want {
				t.Fatalf("status %s, error %v\nwant %s, %q", tr.Status, tr.Error, tables.StatusEnvError, c.want)
			}
			if len(p.reqs) != 1 || len(tr.Turns) != 2 {
				t.Errorf("%d requests and %d turns, want 1 and 2 (the observation and the reply)", len(p.reqs), len(tr.Turns))
			}
		})
	}
}
