package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Join writes a reply back as the text a Hermes model writes: the content,
// then the calls as Format writes them, on a new line. It is the inverse
// of Parse for content without trailing white space and calls whose
// arguments are compact JSON: a policy that returned its calls apart from
// its text (vLLM with --tool-call-parser hermes, rlpipe policy serve) is
// read back as the reply it sampled, when the model wrote the calls as
// Format does. Without calls it is content.
func Join(content string, calls []Call) string {
	switch {
	case len(calls) == 0:
		return content
	case content == "":
		return Format(calls)
	}
	return content + "\n" + Format(calls)
}

// Wire is a call as OpenAI's API writes it in a message's tool_calls:
// {"id", "type": "function", "function": {"name", "arguments"}}, the
// arguments a JSON text in a string.
type Wire struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type"`
	Function WireFunction `json:"function"`
}

// WireFunction is the function part of a Wire call.
type WireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// UnmarshalJSON reads a call whose arguments are a JSON text in a string,
// as OpenAI writes them, or a JSON object, as some clients send them.
func (w *Wire) UnmarshalJSON(b []byte) error {
	var raw struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	args := bytes.TrimSpace(raw.Function.Arguments)
	switch {
	case len(args) == 0 || bytes.Equal(args, []byte("null")):
		args = []byte("{}")
	case args[0] == '"':
		var s string
		if err := json.Unmarshal(args, &s); err != nil {
			return err
		}
		args = []byte(s)
	}
	*w = Wire{ID: raw.ID, Type: raw.Type, Function: WireFunction{Name: raw.Function.Name, Arguments: string(args)}}
	return nil
}

// ToWire returns calls as OpenAI's tool_calls; nil for none.
func ToWire(calls []Call) []Wire {
	if len(calls) == 0 {
		return nil
	}
	out := make([]Wire, len(calls))
	for i, c := range calls {
		out[i] = Wire{ID: c.ID, Type: "function", Function: WireFunction{Name: c.Name, Arguments: c.Arguments}}
	}
	return out
}

// FromWire returns OpenAI's tool_calls as calls; nil for none.
func FromWire(ws []Wire) []Call {
	if len(ws) == 0 {
		return nil
	}
	out := make([]Call, len(ws))
	for i, w := range ws {
		out[i] = Call{ID: w.ID, Name: w.Function.Name, Arguments: w.Function.Arguments}
	}
	return out
}

// ErrArguments is wrapped by Check's errors: a call the offered tools do
// not accept.
var ErrArguments = errors.New("tool call does not match the tools offered")

// Check checks a call against the tools offered: its name must be one of
// theirs and its arguments an object that the tool's parameters schema
// accepts. The schema is read as far as function-calling schemas go:
// "properties" with a "type" (string, integer, number, boolean, object,
// array), "required", and "additionalProperties": false. The error, which
// wraps ErrArguments, is written for the policy: it names the call, the
// tool and the key, and lists the tools or keys it may use.
func Check(tools []Tool, c Call) error {
	i := slices.IndexFunc(tools, func(t Tool) bool { return t.Function.Name == c.Name })
	if i < 0 {
		names := make([]string, len(tools))
		for k, t := range tools {
			names[k] = t.Function.Name
		}
		return fmt.Errorf("%w: unknown tool %q: call one of %s", ErrArguments, c.Name, strings.Join(names, ", "))
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil || args == nil {
		return fmt.Errorf("%w: the arguments of %s are not a JSON object", ErrArguments, c.Name)
	}
	var schema struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
		Required             []string `json:"required"`
		AdditionalProperties *bool    `json:"additionalProperties"`
	}
	if p := tools[i].Function.Parameters; len(p) > 0 {
		if err := json.Unmarshal(p, &schema); err != nil {
			return fmt.Errorf("%w: the parameters schema of %s cannot be read: %v", ErrArguments, c.Name, err)
		}
	}
	for _, k := range schema.Required {
		if _, ok := args[k]; !ok {
			return fmt.Errorf("%w: %s needs the argument %q", ErrArguments, c.Name, k)
		}
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		prop, known := schema.Properties[k]
		if !known {
			if schema.AdditionalProperties != nil && !*schema.AdditionalProperties {
				allowed := make([]string, 0, len(schema.Properties))
				for name := range schema.Properties {
					allowed = append(allowed, name)
				}
				slices.Sort(allowed)
				return fmt.Errorf("%w: %s takes no argument %q; its arguments are %s", ErrArguments, c.Name, k, strings.Join(allowed, ", "))
			}
			continue
		}
		if prop.Type != "" && !ofType(args[k], prop.Type) {
			return fmt.Errorf("%w: the argument %q of %s must be of type %s", ErrArguments, k, c.Name, prop.Type)
		}
	}
	return nil
}

// ofType reports whether the JSON value v is of the JSON Schema type t;
// an unknown type accepts anything.
func ofType(v json.RawMessage, t string) bool {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return false
	}
	switch t {
	case "string":
		return v[0] == '"'
	case "boolean":
		return bytes.Equal(v, []byte("true")) || bytes.Equal(v, []byte("false"))
	case "object":
		return v[0] == '{'
	case "array":
		return v[0] == '['
	case "number", "integer":
		var f float64
		if json.Unmarshal(v, &f) != nil {
			return false
		}
		return t == "number" || f == float64(int64(f))
	case "null":
		return bytes.Equal(v, []byte("null"))
	}
	return true
}
