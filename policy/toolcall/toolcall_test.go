package toolcall_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/policy/toolcall"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, reply, content string
		calls                []toolcall.Call
	}{
		{"no call", "The answer is 42.", "The answer is 42.", nil},
		{"one call", "I will look.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"in.txt\"}}\n</tool_call>",
			"I will look.", []toolcall.Call{{Name: "read_file", Arguments: `{"path":"in.txt"}`}}},
		{"content empty", "<tool_call>{\"name\":\"bash\",\"arguments\":{}}</tool_call>",
			"", []toolcall.Call{{Name: "bash", Arguments: `{}`}}},
		{"two calls", "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"y\": [1, 2]}}\n</tool_call>\n",
			"", []toolcall.Call{{Name: "a", Arguments: `{"x":1}`}, {Name: "b", Arguments: `{"y":[1,2]}`}}},
		{"open last call with whole JSON", "<tool_call>\n{\"name\": \"submit\", \"arguments\": {\"answer\": \"7\"}}",
			"", []toolcall.Call{{Name: "submit", Arguments: `{"answer":"7"}`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content, calls, err := toolcall.Parse(tc.reply)
			if err != nil {
				t.Fatal(err)
			}
			if content != tc.content || !slices.Equal(calls, tc.calls) {
				t.Errorf("Parse = %q, %+v; want %q, %+v", content, calls, tc.content, tc.calls)
			}
		})
	}
}

func TestParseMalformed(t *testing.T) {
	for _, tc := range []struct{ name, reply, want string }{
		{"not JSON", "<tool_call>\nread the file\n</tool_call>",
			`malformed tool call: call 1: want a JSON object {"name": …, "arguments": {…}}: invalid character 'r' looking for beginning of value`},
		{"no name", `<tool_call>{"arguments": {}}</tool_call>`, `malformed tool call: call 1: no "name"`},
		{"arguments a string", `<tool_call>{"name": "bash", "arguments": "{\"cmd\": \"ls\"}"}</tool_call>`,
			`malformed tool call: call 1: "arguments" of bash is not a JSON object`},
		{"no arguments", `<tool_call>{"name": "bash"}</tool_call>`, `malformed tool call: call 1: "arguments" of bash is not a JSON object`},
		{"text after JSON", `<tool_call>{"name": "a", "arguments": {}} and more</tool_call>`, `malformed tool call: call 1: text after the JSON object`},
		{"text between calls", `<tool_call>{"name": "a", "arguments": {}}</tool_call> then <tool_call>{"name": "b", "arguments": {}}</tool_call>`,
			`malformed tool call: text after call 1 is not another <tool_call>: "then <tool_call>{\"name\": \"b\", \"arguments…"`},
		{"cut off", `<tool_call>{"name": "a", "argu`,
			`malformed tool call: call 1 is not closed with </tool_call> and its JSON is not whole: want a JSON object {"name": …, "arguments": {…}}: unexpected EOF`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, calls, err := toolcall.Parse(tc.reply)
			if !errors.Is(err, toolcall.ErrMalformed) || err.Error() != tc.want {
				t.Errorf("Parse error = %v\nwant %s", err, tc.want)
			}
			if calls != nil {
				t.Errorf("calls = %+v, want none", calls)
			}
		})
	}
}

func TestFormatParsesBack(t *testing.T) {
	calls := []toolcall.Call{{Name: "write_file", Arguments: `{"path":"a.txt","text":"<b> & c"}`}, {Name: "submit", Arguments: `{}`}}
	text := toolcall.Format(calls)
	want := "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\":\"a.txt\",\"text\":\"<b> & c\"}}\n</tool_call>\n" +
		"<tool_call>\n{\"name\": \"submit\", \"arguments\": {}}\n</tool_call>"
	if text != want {
		t.Errorf("Format =\n%s\nwant\n%s", text, want)
	}
	content, back, err := toolcall.Parse(text)
	if err != nil || content != "" || !slices.Equal(back, calls) {
		t.Errorf("Parse(Format) = %q, %+v, %v", content, back, err)
	}
}

var tools = []toolcall.Tool{
	{Type: "function", Function: toolcall.Function{Name: "bash", Description: "Run a shell command; <stdout> & <stderr> come back",
		Parameters: json.RawMessage(`{"type":"object","properties":{"cmd":{"type":"string","description":"the command, e.g. \"ls -l\""}},"required":["cmd"]}`)}},
	{Type: "function", Function: toolcall.Function{Name: "submit", Description: "Finish: é",
		Parameters: json.RawMessage(`{"type": "object", "properties": {}}`)}},
}

// TestPromptMatchesQwenTemplate renders Qwen2.5's chat template (the copy
// TRL ships) with transformers' own jinja environment and checks that its
// system turn holds Prompt's block exactly.
func TestPromptMatchesQwenTemplate(t *testing.T) {
	py := pyvenv.Python(t, "renders Qwen2.5's chat template with transformers")
	block, err := toolcall.Prompt(tools)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(tools)
	out := pyvenv.Run(t, "render the template", in, py, "-c", `
import json, sys, importlib.resources as r
from transformers.utils.chat_template_utils import _compile_jinja_template
tmpl = (r.files("trl") / "chat_templates" / "qwen2_5.jinja").read_text()
tools = json.load(sys.stdin)
sys.stdout.write(_compile_jinja_template(tmpl).render(messages=[{"role": "user", "content": "hi"}], tools=tools, add_generation_prompt=False))
`)
	rendered := string(out)
	want := "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n" + block + "<|im_end|>\n"
	if !strings.HasPrefix(rendered, want) {
		t.Errorf("Qwen2.5's template renders\n%s\nwant its system turn to be\n%s", rendered, want)
	}
	if p, _ := toolcall.Prompt(nil); p != "" {
		t.Errorf("Prompt(nil) = %q, want \"\"", p)
	}
}
