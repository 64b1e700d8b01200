package server

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/rlpipe/rlpipe/policy"
)

// maxTopLogprobs caps top_logprobs (and a completions request's logprobs),
// as OpenAI's API and vLLM's default --max-logprobs do.
const maxTopLogprobs = 20

// Logprobs in the two shapes of OpenAI's API.
type (
	// textLogprobs is a completions choice's: parallel lists, one entry
	// per token; token_logprobs and top_logprobs are null at the first
	// echoed prompt token.
	textLogprobs struct {
		Tokens        []string   `json:"tokens"`
		TokenLogprobs []*float64 `json:"token_logprobs"`
		TopLogprobs   []topDict  `json:"top_logprobs"`
		TextOffset    []int      `json:"text_offset"` // null when tokens are not text
	}
	// chatLogprobs is a chat choice's: one entry per token.
	chatLogprobs struct {
		Content []chatToken `json:"content"`
	}
	chatToken struct {
		Token       string    `json:"token"`
		Logprob     float64   `json:"logprob"`
		Bytes       []int     `json:"bytes"`
		TopLogprobs []chatAlt `json:"top_logprobs"`
	}
	chatAlt struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
		Bytes   []int   `json:"bytes"`
	}
)

// topDict is a completions position's alternatives, {token: logprob},
// most likely first: encoding/json would sort a map's keys instead. A
// nil topDict is null.
type topDict []alt

type alt struct {
	token   string
	logprob float64
}

func (d topDict) MarshalJSON() ([]byte, error) {
	if d == nil {
		return []byte("null"), nil
	}
	b := []byte{'{'}
	for i, a := range d {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(a.token)
		if err != nil {
			return nil, err
		}
		// A token of probability 0 has logprob −Inf, which JSON cannot
		// hold: −9999, as vLLM sends it.
		v, err := json.Marshal(max(a.logprob, -9999))
		if err != nil {
			return nil, fmt.Errorf("top_logprobs %q: %w", a.token, err)
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// speller writes token ids as the response shows them: as text with the
// policy's TokenTexter, or as vLLM's "token_id:N" when the request set
// return_tokens_as_token_ids or the policy cannot spell its tokens.
type speller struct{ tt policy.TokenTexter }

func (sp speller) token(id int32) string {
	if sp.tt == nil {
		return "token_id:" + strconv.FormatInt(int64(id), 10)
	}
	return sp.tt.TokenText(id)
}

// position is one token of a choice's logprobs.
type position struct {
	id  int32
	lp  *float64              // nil: none (the first echoed prompt token)
	top []policy.TokenLogprob // nil: not computed
}

// finite writes a float32 log-probability as the float64 of the same
// value, which a reader converts back exactly; -Inf and NaN, which JSON
// cannot carry, go out as -9999 as in vLLM and OpenAI's API.
func finite(v float32) float64 {
	f := float64(v)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return -9999
	}
	return f
}

// positions lists a sample's logprobs, after its prompt's when echoed.
// The first prompt token has none, as in OpenAI's and vLLM's answers.
func positions(smp *policy.Sample, echo bool) []position {
	var out []position
	if p := smp.Prompt; echo && p != nil {
		for j, id := range p.TokenIDs {
			pos := position{id: id}
			if j > 0 && j < len(p.Logprobs) {
				f := finite(p.Logprobs[j])
				pos.lp = &f
				if j < len(p.TopLogprobs) {
					pos.top = p.TopLogprobs[j]
				}
			}
			out = append(out, pos)
		}
	}
	for k, v := range smp.Logprobs {
		f := finite(v)
		pos := position{id: -1, lp: &f}
		if k < len(smp.TokenIDs) {
			pos.id = smp.TokenIDs[k]
		}
		if k < len(smp.TopLogprobs) {
			pos.top = smp.TopLogprobs[k]
		}
		out = append(out, pos)
	}
	return out
}

// textLogprobsOf is a completions choice's logprobs. Each position's
// top_logprobs holds its k most likely tokens and, when it is not among
// them, the sampled one: up to k+1 entries, as OpenAI documents. text_offset
// counts characters into the choice's text (the echoed prompt included),
// capped at its length, for tokens that are text.
func textLogprobsOf(ps []position, sp speller, text string) *textLogprobs {
	out := &textLogprobs{Tokens: make([]string, len(ps)), TokenLogprobs: make([]*float64, len(ps)), TopLogprobs: make([]topDict, len(ps))}
	if sp.tt != nil {
		out.TextOffset = make([]int, len(ps))
	}
	end, at := utf8.RuneCountInString(text), 0
	for i, p := range ps {
		out.Tokens[i] = sp.token(p.id)
		out.TokenLogprobs[i] = p.lp
		if out.TextOffset != nil {
			out.TextOffset[i] = min(at, end)
			at += utf8.RuneCountInString(out.Tokens[i])
		}
		if p.lp == nil {
			continue
		}
		d := make(topDict, 0, len(p.top)+1)
		seen := map[string]bool{}
		sampled := false
		for _, t := range p.top {
			tok := sp.token(t.ID)
			if seen[tok] {
				continue // two ids spelled alike: the likelier one stays
			}
			seen[tok] = true
			d = append(d, alt{tok, finite(t.Logprob)})
			sampled = sampled || t.ID == p.id
		}
		if !sampled && !seen[out.Tokens[i]] {
			d = append(d, alt{out.Tokens[i], *p.lp})
		}
		out.TopLogprobs[i] = d
	}
	return out
}

// chatLogprobsOf is a chat choice's logprobs: at each position exactly the
// k most likely tokens (fewer when the policy has fewer), as OpenAI's chat
// API answers.
func chatLogprobsOf(ps []position, sp speller) *chatLogprobs {
	out := &chatLogprobs{Content: make([]chatToken, len(ps))}
	for i, p := range ps {
		tok := sp.token(p.id)
		ct := chatToken{Token: tok, Bytes: utf8Bytes(tok), TopLogprobs: make([]chatAlt, len(p.top))}
		if p.lp != nil {
			ct.Logprob = *p.lp
		}
		for j, t := range p.top {
			s := sp.token(t.ID)
			ct.TopLogprobs[j] = chatAlt{Token: s, Logprob: finite(t.Logprob), Bytes: utf8Bytes(s)}
		}
		out.Content[i] = ct
	}
	return out
}

// utf8Bytes lists a token's UTF-8 bytes, as the bytes field carries them.
func utf8Bytes(s string) []int {
	out := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = int(s[i])
	}
	return out
}
