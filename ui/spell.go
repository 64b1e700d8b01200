package ui

import (
	"strings"
	"sync"

	"github.com/rlpipe/rlpipe/policy/tiny"
)

// speller spells token ids as text: a tokenizer's reverse.
type speller interface {
	TokenText(id int32) string
}

// shipped are the embedded models by version ("tiny-arith@3f2a…"), loaded
// the first time an episode asks: the models whose tokenizer the UI has
// at hand. A policy served elsewhere (vLLM, an OpenAI-compatible server)
// keeps its tokenizer to itself, and its episodes show token ids.
var shipped = sync.OnceValue(func() map[string]speller {
	out := map[string]speller{}
	for _, load := range []func() (*tiny.Model, error){tiny.Embedded, tiny.EmbeddedChain, tiny.EmbeddedRG, tiny.EmbeddedTool} {
		if m, err := load(); err == nil {
			out[m.Version()] = m
		}
	}
	return out
})

// spellerFor finds the tokenizer of the base model a policy version names
// (an adapter, "+name", does not change the vocabulary); nil when the UI
// has none.
func spellerFor(policyVersion string) speller {
	base, _, _ := strings.Cut(policyVersion, "+")
	if !strings.Contains(base, "@") {
		return nil
	}
	return shipped()[base]
}
