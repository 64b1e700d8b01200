package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Tool is one tool offered to the policy, as an entry of OpenAI's "tools".
type Tool struct {
	// Type is "function".
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function describes a callable function: its name, what it does, and
// the JSON Schema of its arguments object.
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Call is one call the policy made: an entry of OpenAI's "tool_calls".
type Call struct {
	// ID names the call, so that the tool message answering it can say
	// which (OpenAI's tool_call_id); "" when the policy gave none.
	ID string `json:"id,omitempty"`
	// Name is the function's name.
	Name string `json:"name"`
	// Arguments is the arguments object as JSON text.
	Arguments string `json:"arguments"`
}

// Markers of the Hermes format.
const (
	Open  = "<tool_call>"
	Close = "</tool_call>"
)

// ErrMalformed is wrapped by every error Parse returns.
var ErrMalformed = errors.New("malformed tool call")

// Parse splits a reply into its content (the text before the first
// <tool_call>, trimmed of the white space before the marker) and its calls.
// A reply without <tool_call> is all content, with no calls. The error,
// wrapping ErrMalformed, names the call (1-based) and what is wrong: a
// body that is not a JSON object, a missing or empty "name", "arguments"
// that is not an object, text between calls, or a call not closed whose
// JSON is not whole either.
func Parse(reply string) (content string, calls []Call, err error) {
	i := strings.Index(reply, Open)
	if i < 0 {
		return reply, nil, nil
	}
	content = strings.TrimRight(reply[:i], " \t\r\n")
	rest := reply[i:]
	for n := 1; rest != ""; n++ {
		body, ok := strings.CutPrefix(rest, Open)
		if !ok {
			return content, nil, fmt.Errorf("%w: text after call %d is not another <tool_call>: %q", ErrMalformed, n-1, clip(rest))
		}
		end := strings.Index(body, Close)
		closed := end >= 0
		if closed {
			rest = strings.TrimLeft(body[end+len(Close):], " \t\r\n")
			body = body[:end]
		} else {
			rest = ""
		}
		c, err := parseBody(body)
		if err != nil {
			if !closed {
				return content, nil, fmt.Errorf("%w: call %d is not closed with %s and its JSON is not whole: %v", ErrMalformed, n, Close, err)
			}
			return content, nil, fmt.Errorf("%w: call %d: %v", ErrMalformed, n, err)
		}
		calls = append(calls, c)
	}
	return content, calls, nil
}

func parseBody(body string) (Call, error) {
	var obj struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	dec := json.NewDecoder(strings.NewReader(body))
	if err := dec.Decode(&obj); err != nil {
		return Call{}, fmt.Errorf("want a JSON object {\"name\": …, \"arguments\": {…}}: %v", err)
	}
	if dec.More() {
		return Call{}, errors.New("text after the JSON object")
	}
	if obj.Name == nil || *obj.Name == "" {
		return Call{}, errors.New(`no "name"`)
	}
	args := bytes.TrimSpace(obj.Arguments)
	if len(args) == 0 || args[0] != '{' {
		return Call{}, fmt.Errorf(`"arguments" of %s is not a JSON object`, *obj.Name)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, args); err != nil {
		return Call{}, err
	}
	return Call{Name: *obj.Name, Arguments: buf.String()}, nil
}

// clip shortens s for an error message.
func clip(s string) string {
	const max = 40
	if r := []rune(s); len(r) > max {
		return string(r[:max]) + "…"
	}
	return s
}

// Format writes calls as Hermes text, each on its own lines:
// "<tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call>", joined
// by a newline. ARGS is the call's Arguments text as it is.
func Format(calls []Call) string {
	var b strings.Builder
	for i, c := range calls {
		if i > 0 {
			b.WriteByte('\n')
		}
		name, _ := marshal(c.Name)
		fmt.Fprintf(&b, "%s\n{\"name\": %s, \"arguments\": %s}\n%s", Open, name, c.Arguments, Close)
	}
	return b.String()
}

// Prompt returns the system-prompt block that offers tools to a Hermes or
// Qwen model, as Qwen2.5's chat template writes it: a "# Tools" heading,
// each tool's JSON (Python json.dumps spacing, keys as given) inside
// <tools></tools>, and how to call them. It is "" when there are no tools.
func Prompt(tools []Tool) (string, error) {
	if len(tools) == 0 {
		return "", nil
	}
	var b strings.Builder
	b.WriteString("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
	for _, t := range tools {
		raw, err := marshal(t)
		if err != nil {
			return "", fmt.Errorf("tool %s: %w", t.Function.Name, err)
		}
		s, err := pyJSON(raw)
		if err != nil {
			return "", fmt.Errorf("tool %s: %w", t.Function.Name, err)
		}
		b.WriteString("\n" + s)
	}
	b.WriteString("\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
		"<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>")
	return b.String(), nil
}

// marshal encodes v as JSON without escaping <, > and &, as Python's
// json.dumps does not.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// pyJSON re-spaces compact JSON as Python's json.dumps does by default
// (", " between items, ": " after keys), keeping key order and string
// contents as they are.
func pyJSON(compact []byte) (string, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, compact); err != nil {
		return "", err
	}
	var out strings.Builder
	inString, escaped := false, false
	for _, c := range buf.Bytes() {
		out.WriteByte(c)
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ',' || c == ':':
			out.WriteByte(' ')
		}
	}
	return out.String(), nil
}
