package toolcall_test

import (
	"encoding/json"
	"fmt"

	"github.com/rlpipe/rlpipe/policy/toolcall"
)

// An environment reads a reply's calls, checks each against the tools it
// offered, and answers the policy's mistakes instead of failing.
func ExampleCheck() {
	tools := []toolcall.Tool{{Type: "function", Function: toolcall.Function{Name: "read_file",
		Parameters: json.RawMessage(`{"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}`)}}}
	reply := "Let me look.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"in.txt\"}}\n</tool_call>\n" +
		"<tool_call>\n{\"name\": \"read_file\", \"arguments\": {}}\n</tool_call>"
	content, calls, err := toolcall.Parse(reply)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("content %q\n", content)
	for _, c := range calls {
		fmt.Println(c.Name, c.Arguments, toolcall.Check(tools, c))
	}
	// Calls a policy returned apart from its text, written back as text
	// (the arguments as Parse compacted them).
	fmt.Println(toolcall.Join(content, calls[:1]))
	// Output:
	// content "Let me look."
	// read_file {"path":"in.txt"} <nil>
	// read_file {} tool call does not match the tools offered: read_file needs the argument "path"
	// Let me look.
	// <tool_call>
	// {"name": "read_file", "arguments": {"path":"in.txt"}}
	// </tool_call>
}
