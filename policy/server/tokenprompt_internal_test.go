package server

import (
	"encoding/json"
	"testing"
)

// tokenPrompts never panics; what it accepts is one or more requests of
// at least one token id each, and what it neither accepts nor refuses is
// left to the text prompt's reader.
func FuzzTokenPrompts(f *testing.F) {
	for _, s := range []string{`[1,2,3]`, `[[1],[2,3]]`, `[[1],[]]`, `[]`, `"text"`, `["a","b"]`, `[1,"a"]`, `[1.5]`, `null`, ``, `[[`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		reqs, e := tokenPrompts(json.RawMessage(raw), 7)
		if e != nil {
			if reqs != nil || e.Param != "prompt" {
				t.Fatalf("%q: refused with %+v but returned %d requests", raw, e, len(reqs))
			}
			return
		}
		for i, r := range reqs {
			if len(r.PromptTokenIDs) == 0 || r.Seed != 7 || r.Prompt != "" || r.Messages != nil {
				t.Fatalf("%q: request %d is %+v", raw, i, r)
			}
		}
	})
}
