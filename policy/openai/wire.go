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
)

// API paths, appended to an endpoint's base URL.
const (
	pathCompletions = "/v1/completions"
	pathChat        = "/v1/chat/completions"
	pathModels      = "/v1/models"
	pathLoad        = "/v1/load_lora_adapter"
	pathUnload      = "/v1/unload_lora_adapter"
)

// completionRequest is the body of POST /v1/completions.
type completionRequest struct {
	Model       string   `json:"model,omitempty"`
	Prompt      string   `json:"prompt"`
	N           int      `json:"n"`
	Seed        int64    `json:"seed"`
	Temperature float64  `json:"temperature"` // always sent: 0 is greedy, absent is 1
	TopP        float64  `json:"top_p,omitempty"`
	MaxTokens   int      `json:"max_tokens,omitempty"`
	Stop        []string `json:"stop,omitempty"`
	// Logprobs k asks for the sampled token's log-probability and the k
	// most likely tokens; 1 when only the sampled one is wanted (llama.cpp
	// returns none for 0), its alternative then ignored.
	Logprobs int `json:"logprobs,omitempty"`
	// vLLM: logprob tokens as "token_id:1234", and the sampled ids in
	// choices[].token_ids.
	TokensAsIDs    bool `json:"return_tokens_as_token_ids,omitempty"`
	ReturnTokenIDs bool `json:"return_token_ids,omitempty"`
}

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	Model          string           `json:"model,omitempty"`
	Messages       []policy.Message `json:"messages"`
	N              int              `json:"n"`
	Seed           int64            `json:"seed"`
	Temperature    float64          `json:"temperature"`
	TopP           float64          `json:"top_p,omitempty"`
	MaxTokens      int              `json:"max_tokens,omitempty"`
	Stop           []string         `json:"stop,omitempty"`
	Logprobs       bool             `json:"logprobs,omitempty"`
	TopLogprobs    *int             `json:"top_logprobs,omitempty"`
	TokensAsIDs    bool             `json:"return_tokens_as_token_ids,omitempty"`
	ReturnTokenIDs bool             `json:"return_token_ids,omitempty"`
}

// response is what the client reads of a completions or chat answer.
type response struct {
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   *struct {
		PromptTokens int `json:"prompt_tokens"`
	} `json:"usage"`
	// PromptTokenIDs are the prompt's token ids, as the server's template
	// and tokenizer made them: vLLM's return_token_ids puts them here in
	// a chat answer, and in each choice of a completions answer.
	PromptTokenIDs []int32 `json:"prompt_token_ids"`
}

type choice struct {
	Index   int    `json:"index"`
	Text    string `json:"text"` // completions
	Message *struct {
		Content *string `json:"content"`
	} `json:"message"` // chat
	Logprobs *struct {
		// completions
		Tokens        []string             `json:"tokens"`
		TokenLogprobs []*float64           `json:"token_logprobs"`
		TopLogprobs   []map[string]float64 `json:"top_logprobs"` // up to k+1: the sampled token is added
		// chat
		Content []struct {
			Token       string   `json:"token"`
			Logprob     *float64 `json:"logprob"`
			TopLogprobs []struct {
				Token   string  `json:"token"`
				Logprob float64 `json:"logprob"`
			} `json:"top_logprobs"`
		} `json:"content"`
	} `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
	// StopReason is vLLM's: the stop string that ended the text, or the id
	// of a stop token (a number, which Sample.StopReason does not keep).
	StopReason any     `json:"stop_reason"`
	TokenIDs   []int32 `json:"token_ids"` // vLLM's return_token_ids
	// PromptTokenIDs: a completions choice's prompt token ids (vLLM's
	// return_token_ids).
	PromptTokenIDs []int32 `json:"prompt_token_ids"`
}

// apiError is an error body, OpenAI's {"error": {...}} or vLLM's older
// flat {"object": "error", "message": ...}.
type apiError struct {
	Error *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Param   any    `json:"param"`
	} `json:"error"`
	Message string `json:"message"`
	Type    string `json:"type"`
}

func (e apiError) message() (msg, typ string) {
	if e.Error != nil {
		return e.Error.Message, e.Error.Type
	}
	return e.Message, e.Type
}

// decodeResponse parses a 2xx body into resp and checks that it holds
// exactly n choices with indices 0..n-1.
func decodeResponse(b []byte, n int, resp *response) error {
	if err := json.Unmarshal(b, resp); err != nil {
		return malformed(b, err)
	}
	if len(resp.Choices) != n {
		return fmt.Errorf("response has %d choice(s) for n=%d", len(resp.Choices), n)
	}
	slices.SortFunc(resp.Choices, func(a, b choice) int { return a.Index - b.Index })
	for i, c := range resp.Choices {
		if c.Index != i {
			return fmt.Errorf("response choices have indices %v, want 0..%d", indices(resp.Choices), n-1)
		}
	}
	return nil
}

func indices(cs []choice) []int {
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
func (r *response) samples(req policy.Request, version string, sp policy.Sampling) []policy.Sample {
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
