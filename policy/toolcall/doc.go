// Package toolcall is the function-calling format of tool calls: the
// tools a policy is offered (OpenAI's "tools" entries, a JSON Schema of
// each function's arguments), the calls it makes (OpenAI's "tool_calls"),
// and the Hermes text format in which models of the Qwen and Hermes
// families write those calls in their replies:
//
//	I will read the input first.
//	<tool_call>
//	{"name": "read_file", "arguments": {"path": "input.txt"}}
//	</tool_call>
//
// Parse reads such a reply the way vLLM's hermes tool parser does: the
// content is the text before the first <tool_call>, each call's body is a
// JSON object with "name" and "arguments", and a last call left open (cut
// off at the token limit) still counts when its JSON is whole. Unlike
// vLLM, which then returns the whole reply as content, Parse says what is
// wrong and where, so an environment can tell the policy (a malformed call
// is the policy's mistake, answered with an observation, never a crash).
//
// Arguments keep the text the model wrote (compacted); re-serializing
// them, as vLLM does, would change the tokens of the history. Format
// writes calls back as Hermes text, and Prompt the system-prompt block
// that lists the tools, as Qwen2.5's chat template does.
package toolcall
