package toolcall_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/policy/toolcall"
)

func TestJoinParsesBack(t *testing.T) {
	calls := []toolcall.Call{{Name: "bash", Arguments: `{"cmd":"ls"}`}}
	for _, tc := range []struct{ name, content, want string }{
		{"content and a call", "I will look.", "I will look.\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"cmd\":\"ls\"}}\n</tool_call>"},
		{"a call only", "", "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"cmd\":\"ls\"}}\n</tool_call>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := toolcall.Join(tc.content, calls)
			if text != tc.want {
				t.Fatalf("Join = %q, want %q", text, tc.want)
			}
			content, back, err := toolcall.Parse(text)
			if err != nil || content != tc.content || !slices.Equal(back, calls) {
				t.Errorf("Parse(Join) = %q, %+v, %v", content, back, err)
			}
		})
	}
	if got := toolcall.Join("plain", nil); got != "plain" {
		t.Errorf("Join without calls = %q, want the content", got)
	}
}

func TestWire(t *testing.T) {
	calls := []toolcall.Call{{ID: "call_0_0", Name: "bash", Arguments: `{"cmd":"ls"}`}}
	b, err := json.Marshal(toolcall.ToWire(calls))
	if want := `[{"id":"call_0_0","type":"function","function":{"name":"bash","arguments":"{\"cmd\":\"ls\"}"}}]`; err != nil || string(b) != want {
		t.Fatalf("ToWire = %s (%v), want %s", b, err, want)
	}
	for _, tc := range []struct{ name, in, args string }{
		{"arguments a string (OpenAI)", string(b), `{"cmd":"ls"}`},
		{"arguments an object", `[{"id":"call_0_0","type":"function","function":{"name":"bash","arguments":{"cmd": "ls"}}}]`, `{"cmd": "ls"}`},
		{"arguments null", `[{"id":"call_0_0","type":"function","function":{"name":"bash","arguments":null}}]`, `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ws []toolcall.Wire
			if err := json.Unmarshal([]byte(tc.in), &ws); err != nil {
				t.Fatal(err)
			}
			want := []toolcall.Call{{ID: "call_0_0", Name: "bash", Arguments: tc.args}}
			if got := toolcall.FromWire(ws); !slices.Equal(got, want) {
				t.Errorf("FromWire = %+v, want %+v", got, want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	offered := []toolcall.Tool{
		{Type: "function", Function: toolcall.Function{Name: "bash", Parameters: json.RawMessage(`{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"],"additionalProperties":false}`)}},
		{Type: "function", Function: toolcall.Function{Name: "wait", Parameters: json.RawMessage(`{"type":"object","properties":{"s":{"type":"integer"},"loud":{"type":"boolean"}}}`)}},
	}
	for _, tc := range []struct{ name, call, args, want string }{
		{"ok", "bash", `{"cmd":"ls"}`, ""},
		{"extra key allowed", "wait", `{"s":2,"why":"x"}`, ""},
		{"unknown tool", "python", `{}`, `tool call does not match the tools offered: unknown tool "python": call one of bash, wait`},
		{"missing required key", "bash", `{}`, `tool call does not match the tools offered: bash needs the argument "cmd"`},
		{"wrong type", "bash", `{"cmd":["ls"]}`, `tool call does not match the tools offered: the argument "cmd" of bash must be of type string`},
		{"not an integer", "wait", `{"s":1.5}`, `tool call does not match the tools offered: the argument "s" of wait must be of type integer`},
		{"additional property refused", "bash", `{"cmd":"ls","cwd":"/"}`, `tool call does not match the tools offered: bash takes no argument "cwd"; its arguments are cmd`},
		{"arguments not an object", "bash", `[1]`, `tool call does not match the tools offered: the arguments of bash are not a JSON object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := toolcall.Check(offered, toolcall.Call{Name: tc.call, Arguments: tc.args})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, toolcall.ErrArguments) || err.Error() != tc.want {
				t.Errorf("Check = %v\nwant %s", err, tc.want)
			}
		})
	}
}
