package ui

import (
	"context"
	"strings"
	"sync"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// Speller spells token ids as text: a tokenizer's reverse
// (*hftokenizer.Tokenizer, *tiny.Model).
type Speller interface {
	TokenText(id int32) string
}

// shipped are the embedded models by version ("tiny-arith@3f2a…"), loaded
// the first time an episode asks: the models whose tokenizer the UI has
// at hand. A policy served elsewhere (vLLM, an OpenAI-compatible server)
// keeps its tokenizer to itself: Options.Tokenizer finds one for it
// (Server.tokenizer), or its episodes show token ids.
var shipped = sync.OnceValue(func() map[string]Speller {
	out := map[string]Speller{}
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
func spellerFor(policyVersion string) Speller {
	base, _, _ := strings.Cut(policyVersion, "+")
	if !strings.Contains(base, "@") {
		return nil
	}
	return shipped()[base]
}

// tokenizer is the speller Options.Tokenizer finds for the run whose
// config ref records (none there: nil recorded). A config's speller is
// kept, so a tokenizer.json is read once, not per episode; an error is
// not, so a fixed file is read on the next request.
func (s *Server) tokenizer(ctx context.Context, ref string) (Speller, error) {
	raw, err := readSmall(ctx, s.st, ref, runs.ConfigPath)
	if err != nil {
		return nil, err
	}
	s.spellMu.Lock()
	defer s.spellMu.Unlock()
	if sp, ok := s.spellers[string(raw)]; ok {
		return sp, nil
	}
	sp, err := s.opts.Tokenizer(raw)
	if err != nil {
		return nil, err
	}
	if s.spellers == nil {
		s.spellers = map[string]Speller{}
	}
	s.spellers[string(raw)] = sp
	return sp, nil
}
