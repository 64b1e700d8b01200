package tiny

import (
	"context"
	"fmt"
	"slices"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/toolcall"
)

// checkTokens returns ids, a request's PromptTokenIDs, once each is a
// token the model reads in a prompt: a character of the vocabulary or
// EOS (which ends an earlier reply), never PAD or BOS. The error names
// the first other id and its position, and wraps ErrVocabulary.
func (m *Model) checkTokens(ids []int32) ([]int32, error) {
	last := int32(m.cfg.VocabSize() - 1)
	for i, id := range ids {
		if id != EOS && (id < numSpecial || id > last) {
			return nil, fmt.Errorf("token id %d at position %d: %w (EOS %d, or %d..%d)", id, i+1, ErrVocabulary, EOS, numSpecial, last)
		}
	}
	return ids, nil
}

// Suffix renders the tokens that carry an episode on after the tokens it
// holds, as PromptTokens would render them, so that the model can run
// episodes token-in/token-out (environments.Renderer): the contents of
// msgs in order, an assistant message followed by EOS. reply is the
// policy's last reply as sampled (nil before the first turn); one that
// did not end with EOS (cut at max_tokens) gets it first, as PromptTokens
// closes an assistant message. The model has no template, so history does
// not change what follows, nor do tools (it renders none in a chat
// request either); the result is the same tokens PromptTokens gives the
// whole transcript past those the episode holds.
func (m *Model) Suffix(_ context.Context, _ []policy.Message, reply []int32, msgs []policy.Message, _ []toolcall.Tool) ([]int32, error) {
	var out []int32
	if reply != nil && (len(reply) == 0 || reply[len(reply)-1] != EOS) {
		out = append(out, EOS)
	}
	tail, err := m.PromptTokens(policy.Request{Messages: msgs})
	if err != nil {
		return nil, err
	}
	return append(out, slices.Clip(tail)...), nil
}
