package server

import (
	"bytes"
	"encoding/json"

	"github.com/rlpipe/rlpipe/policy"
)

// tokenPrompts reads a completions prompt given as token ids, as vLLM
// takes it: a list of ids (one prompt) or a list of such lists. Each
// becomes a request of policy.Request.PromptTokenIDs, which the policy
// continues as they are (an episode run token-in/token-out sends its
// turns so). nil, nil when the prompt is not made of ids (text, or
// missing); a list that mixes ids and text, or an empty list of ids, is
// an error naming the prompt.
func tokenPrompts(raw json.RawMessage, seed int64) ([]policy.Request, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil, nil
	}
	var one []int32
	if json.Unmarshal(raw, &one) == nil && len(one) > 0 {
		return []policy.Request{{PromptTokenIDs: one, Seed: seed}}, nil
	}
	var many [][]int32
	if json.Unmarshal(raw, &many) != nil || len(many) == 0 {
		return nil, nil // text, or an empty list: strings1 says what is wrong
	}
	reqs := make([]policy.Request, len(many))
	for i, ids := range many {
		if len(ids) == 0 {
			return nil, badRequest("prompt", "prompt %d is an empty list of token ids; send at least one token", i)
		}
		reqs[i] = policy.Request{PromptTokenIDs: ids, Seed: seed}
	}
	return reqs, nil
}
