package server_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/rlpipe/rlpipe/policy/tiny"
)

// A completions prompt of token ids, as vLLM takes it, is continued as it
// is: the embedded model answers [ids] and [[ids], [ids]] with the text,
// token ids and prompt token ids it gives the same prompt as text.
func TestTokenIDPrompt(t *testing.T) {
	m, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	url, _ := serve(t, tiny.NewPolicy(m), nil)
	ids, err := m.Tokenize("12+30=")
	if err != nil {
		t.Fatal(err)
	}
	choice := func(prompt string) []string {
		t.Helper()
		status, body := do(t, "POST", url+"/v1/completions",
			`{"prompt": `+prompt+`, "seed": 5, "temperature": 1, "max_tokens": 4, "return_token_ids": true}`)
		if status != 200 {
			t.Fatalf("prompt %s: status %d: %v", prompt, status, body)
		}
		var out []string
		for _, c := range body["choices"].([]any) {
			c := c.(map[string]any)
			out = append(out, fmt.Sprint(c["text"], c["token_ids"], c["prompt_token_ids"]))
		}
		return out
	}
	text := choice(`"12+30="`)
	b, err := json.Marshal(ids)
	if err != nil {
		t.Fatal(err)
	}
	jsonIDs := string(b)
	for _, c := range []struct{ name, prompt string }{
		{"a list of ids", jsonIDs},
		{"a list of lists", "[" + jsonIDs + "," + jsonIDs + "]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i, got := range choice(c.prompt) {
				if got != text[0] {
					t.Errorf("choice %d = %s, want the text prompt's %s", i, got, text[0])
				}
			}
		})
	}
}
