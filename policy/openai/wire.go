package openai

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai/wire"
	"github.com/rlpipe/rlpipe/policy/toolcall"
)

// API paths, appended to an endpoint's base URL.
const (
	pathCompletions = "/v1/completions"
	pathChat        = "/v1/chat/completions"
	pathModels      = "/v1/models"
	pathLoad        = "/v1/load_lora_adapter"
	pathUnload      = "/v1/unload_lora_adapter"
)

// decodeResponse parses a 2xx body into resp and checks that it holds
// exactly n choices with indices 0..n-1.
func decodeResponse(b []byte, n int, resp *wire.Response) error {
	if err := json.Unmarshal(b, resp); err != nil {
		return malformed(b, err)
	}
	if len(resp.Choices) != n {
		return fmt.Errorf("response has %d choice(s) for n=%d", len(resp.Choices), n)
	}
	slices.SortFunc(resp.Choices, func(a, b wire.Choice) int { return a.Index - b.Index })
	for i, c := range resp.Choices {
		if c.Index != i {
			return fmt.Errorf("response choices have indices %v, want 0..%d", indices(resp.Choices), n-1)
		}
	}
	return nil
}

func indices(cs []wire.Choice) []int {
	out := make([]int, len(cs))
	for i, c := range cs {
		out[i] = c.Index
	}
	return out
}

// errMalformed marks a 2xx body the client cannot read.
var errMalformed = errors.New("malformed JSON")

// malformed describes a JSON error with its byte offset.
func malformed(b []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("%w at byte %d of %d: %v", errMalformed, se.Offset, len(b), err)
	case errors.As(err, &te):
		return fmt.Errorf("%w at byte %d of %d: field %q: %v", errMalformed, te.Offset, len(b), te.Field, err)
	}
	return fmt.Errorf("%w (%d bytes): %v", errMalformed, len(b), err)
}

// samples turns a checked response into policy samples.
func samples(r *wire.Response, req policy.Request, version string, sp policy.Sampling) []policy.Sample {
	out := make([]policy.Sample, len(r.Choices))
	prompt := 0
	if r.Usage != nil {
		prompt = r.Usage.PromptTokens
	}
	if version == "" {
		version = r.Model
	}
	for j, c := range r.Choices {
		s := policy.Sample{RequestID: req.ID, Index: j, Text: c.Text, PromptTokens: prompt,
			PolicyVersion: version, Status: policy.StatusOK, FinishReason: policy.FinishStop}
		if c.Message != nil && c.Message.Content != nil {
			s.Text = *c.Message.Content
		}
		if c.Message != nil {
			s.ToolCalls = toolcall.FromWire(c.Message.ToolCalls)
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			s.FinishReason = *c.FinishReason
		}
		if stop, ok := c.StopReason.(string); ok {
			s.StopReason = stop
		}
		var tokens []string
		var lps []*float64
		var tops []map[string]float64
		if c.Logprobs != nil {
			tokens, lps, tops = c.Logprobs.Tokens, c.Logprobs.TokenLogprobs, c.Logprobs.TopLogprobs
			if len(c.Logprobs.Content) > 0 {
				tokens = make([]string, len(c.Logprobs.Content))
				lps = make([]*float64, len(c.Logprobs.Content))
				tops = make([]map[string]float64, len(c.Logprobs.Content))
				for k, t := range c.Logprobs.Content {
					tokens[k], lps[k] = t.Token, t.Logprob
					tops[k] = make(map[string]float64, len(t.TopLogprobs))
					for _, a := range t.TopLogprobs {
						tops[k][a.Token] = a.Logprob
					}
				}
			}
		}
		ids := c.PromptTokenIDs
		if ids == nil {
			ids = r.PromptTokenIDs
		}
		if ids != nil {
			s.Prompt = &policy.PromptLogprobs{TokenIDs: ids}
		}
		s.TokenIDs = c.TokenIDs
		if s.TokenIDs == nil {
			s.TokenIDs = tokenIDs(tokens)
		}
		if sp.Logprobs && sp.TopLogprobs > 0 {
			s.TopLogprobs = topLogprobs(tops, sp.TopLogprobs)
		}
		if sp.Logprobs && lps != nil {
			s.Logprobs = make([]float32, len(lps))
			for k, lp := range lps {
				if lp == nil {
					s.Logprobs[k] = float32(math.NaN())
					continue
				}
				// A float32 logprob sent as float64 converts back exactly.
				s.Logprobs[k] = float32(*lp)
			}
		}
		out[j] = s
	}
	return out
}

// topLogprobs reads each position's alternatives, keyed "token_id:N", as
// the k most likely, most likely first, ties by lower id; nil when any key
// is not in that form or a position has none.
func topLogprobs(tops []map[string]float64, k int) [][]policy.TokenLogprob {
	if len(tops) == 0 {
		return nil
	}
	out := make([][]policy.TokenLogprob, len(tops))
	for i, m := range tops {
		if len(m) == 0 {
			return nil
		}
		for tok, lp := range m {
			id, ok := tokenID(tok)
			if !ok {
				return nil
			}
			out[i] = append(out[i], policy.TokenLogprob{ID: id, Logprob: float32(lp)})
		}
		slices.SortFunc(out[i], func(a, b policy.TokenLogprob) int {
			if a.Logprob != b.Logprob {
				return cmp.Compare(b.Logprob, a.Logprob)
			}
			return cmp.Compare(a.ID, b.ID)
		})
		out[i] = out[i][:min(k, len(out[i]))]
	}
	return out
}

// tokenID parses one "token_id:1234".
func tokenID(t string) (int32, bool) {
	v, ok := strings.CutPrefix(t, "token_id:")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(v, 10, 32)
	return int32(id), err == nil
}

// tokenIDs parses vLLM's "token_id:1234" tokens; nil when any token is
// not in that form (a server without return_tokens_as_token_ids).
func tokenIDs(tokens []string) []int32 {
	if tokens == nil {
		return nil
	}
	ids := make([]int32, len(tokens))
	for i, t := range tokens {
		id, ok := tokenID(t)
		if !ok {
			return nil
		}
		ids[i] = id
	}
	return ids
}
