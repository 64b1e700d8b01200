package openenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemas is what GET /schema says, compiled: the action's JSON Schema
// and the action's string fields.
type schemas struct {
	action *jsonschema.Schema
	// raw is the action schema's text, for messages.
	raw json.RawMessage
	// field is the one required string property of the action, "" when
	// there is not exactly one.
	field string
	// digest is "sha256:" and the first 16 hex digits of the sha256 of
	// the whole /schema document (action, observation, state), its JSON
	// compacted: what of a url: server enters the stage's version.
	digest string
}

// fetchSchema reads GET base/schema and compiles its action schema.
func fetchSchema(ctx context.Context, base string, header http.Header, timeout time.Duration) (*schemas, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/schema", nil)
	if err != nil {
		return nil, err
	}
	req.Header = header.Clone()
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return nil, &Error{ErrUnreachable, fmt.Sprintf("read the action schema at %s/schema: %v: start the server (or let rlpipe start it with rl_options serve:) and check rl_options url", base, err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxFrame))
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, &Error{ErrUnreachable, fmt.Sprintf("read the action schema at %s/schema: HTTP %d %.200s: is this an OpenEnv server (openenv.core's create_app)?", base, resp.StatusCode, body)}
	}
	var doc struct {
		Action json.RawMessage `json:"action"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || len(doc.Action) == 0 || string(doc.Action) == "null" {
		return nil, &Error{ErrProtocol, fmt.Sprintf("read the action schema at %s/schema: no \"action\" JSON Schema in %.200s: is this an OpenEnv server (openenv.core's create_app)?", base, body)}
	}
	s, err := compileSchema(base, doc.Action)
	if err != nil {
		return nil, err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, body); err != nil {
		return nil, &Error{ErrProtocol, fmt.Sprintf("read the action schema at %s/schema: %v", base, err)}
	}
	sum := sha256.Sum256(compact.Bytes())
	s.digest = "sha256:" + hex.EncodeToString(sum[:])[:16]
	return s, nil
}

// compileSchema compiles an action's JSON Schema.
func compileSchema(base string, raw json.RawMessage) (*schemas, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, &Error{ErrProtocol, fmt.Sprintf("read the action schema at %s/schema: %v", base, err)}
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("action.json", doc); err != nil {
		return nil, &Error{ErrProtocol, fmt.Sprintf("read the action schema at %s/schema: %v", base, err)}
	}
	sch, err := c.Compile("action.json")
	if err != nil {
		return nil, &Error{ErrProtocol, fmt.Sprintf("compile the action schema of %s/schema: %v", base, err)}
	}
	s := &schemas{action: sch, raw: raw}
	var shape struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if json.Unmarshal(raw, &shape) == nil {
		var strs []string
		for _, name := range shape.Required {
			if shape.Properties[name].Type == "string" {
				strs = append(strs, name)
			}
		}
		if len(strs) == 1 && len(shape.Required) == 1 {
			s.field = strs[0]
		}
	}
	return s, nil
}

// ActionOptions say how a policy's reply becomes an action.
type ActionOptions struct {
	// Field is the action's string field that holds the reply's text.
	// Default: the action's one required string field, when it has
	// exactly one and JSON is false.
	Field string `json:"field,omitempty"`
	// JSON sends a reply that is a JSON object (bare, or in a ```json
	// fence) as the action itself; with Field set too, other replies go
	// into Field.
	JSON bool `json:"json,omitempty"`
}

// build makes the action of a reply and validates it against the action
// schema. An invalid action is the policy's mistake: feedback says what
// is wrong, for the policy to read; action is nil then.
func (s *schemas) build(o ActionOptions, reply string) (action json.RawMessage, feedback string) {
	field := o.Field
	if field == "" && !o.JSON {
		field = s.field
	}
	var v any
	if obj, ok := jsonObject(reply); o.JSON && ok {
		v = obj
	} else if field != "" {
		v = map[string]any{field: reply}
	} else if o.JSON {
		return nil, "invalid action: the reply is not a JSON object; reply with one JSON object that matches this JSON Schema: " + string(s.raw)
	} else {
		return nil, "invalid action: set rl_options action: {field: NAME} or {json: true}"
	}
	if err := s.action.Validate(v); err != nil {
		return nil, "invalid action: " + validationText(err) + "; the action's JSON Schema: " + string(s.raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, "invalid action: " + err.Error()
	}
	return b, ""
}

// jsonObject parses reply as one JSON object, bare or in a ```json fence.
func jsonObject(reply string) (map[string]any, bool) {
	t := strings.TrimSpace(reply)
	if rest, ok := strings.CutPrefix(t, "```json"); ok {
		if body, _, ok := strings.Cut(rest, "```"); ok {
			t = strings.TrimSpace(body)
		}
	}
	if !strings.HasPrefix(t, "{") {
		return nil, false
	}
	d := json.NewDecoder(strings.NewReader(t))
	d.UseNumber()
	var obj map[string]any
	if err := d.Decode(&obj); err != nil || d.More() {
		return nil, false
	}
	return obj, true
}

// validationText is a validation error's causes, one clause each:
// "at '/answer': got number, want string".
func validationText(err error) string {
	var parts []string
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimSpace(line)
		if p, ok := strings.CutPrefix(line, "- "); ok {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return err.Error()
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}
