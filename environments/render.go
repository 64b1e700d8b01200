package environments

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/toolcall"
)

// A Renderer turns an episode's new messages into the tokens that follow
// the tokens the episode holds, for episodes run token-in/token-out
// (RunnerOptions.Renderer): each turn the policy continues the exact
// token sequence of the episode so far (policy.Request.PromptTokenIDs),
// so a chat template that renders earlier turns differently once later
// ones exist (a thinking model's, which drops earlier <think> blocks)
// never breaks the sequence a trainer trains on.
//
// The embedded tiny model (*tiny.Model) is one; environments/chattemplate
// renders a Hugging Face chat template.
type Renderer interface {
	// Suffix returns the tokens to append to the episode's tokens so far
	// to ask the policy for its next reply: msgs, the messages that came
	// since (the system message and first observation at the first turn;
	// then observations), as the template renders them after history,
	// ending with the template's generation prompt. history is the
	// transcript the episode's tokens hold, its last message the reply
	// whose sampled token ids are reply (nil at the first turn); the
	// template's end of that reply goes first, less what reply already
	// holds (its end-of-turn token). tools are the tools the environment
	// offers (ToolOffer; nil for none): at the first turn the renderer
	// renders them as the template does (Qwen's tools block in the system
	// turn), since the policy gets no tools apart from the prompt's
	// tokens; later turns leave them out, the sequence already holding
	// them. A renderer without a template (the embedded model's) ignores
	// them. An error wrapping ErrInfra is the renderer's machinery
	// failing; any other, messages it cannot render.
	Suffix(ctx context.Context, history []policy.Message, reply []int32, msgs []policy.Message, tools []toolcall.Tool) ([]int32, error)
}

// ErrTokenIn is returned by Runner.Run when an episode run token-in/
// token-out cannot go on: the policy returned no token ids for a reply,
// or returned prompt token ids other than those it was sent.
var ErrTokenIn = errors.New("token-in/token-out episode")

// tokenIn is the state of a token-in/token-out episode: how much of the
// transcript the sequence holds and the last reply's token ids.
type tokenIn struct {
	r        Renderer
	rendered int // messages of the transcript the sequence holds
	reply    []int32
}

// prompt returns the token ids of the next turn's prompt: the sequence
// so far and the rendering of the messages since (and of tools, at the
// first turn).
func (t *tokenIn) prompt(ctx context.Context, seq *sequence, msgs []policy.Message, tools []toolcall.Tool) ([]int32, error) {
	suffix, err := t.r.Suffix(ctx, msgs[:t.rendered], t.reply, msgs[t.rendered:], tools)
	if err != nil {
		return nil, err
	}
	return append(slices.Clone(seq.ids), suffix...), nil
}

// replied records the policy's reply s to a prompt of sent token ids,
// after which the transcript holds n messages. A sample without a
// prompt's token ids gets sent as its prompt, which the sequence then
// extends.
func (t *tokenIn) replied(turn int, sent []int32, s *policy.Sample, n int) error {
	if s.TokenIDs == nil {
		return fmt.Errorf("%w: the policy returned no token ids for its reply at turn %d; use a policy that returns them (the embedded model, vLLM's completions with return_token_ids)", ErrTokenIn, turn)
	}
	if s.Prompt == nil || s.Prompt.TokenIDs == nil {
		s.Prompt = &policy.PromptLogprobs{TokenIDs: sent}
	} else if got := s.Prompt.TokenIDs; !slices.Equal(got, sent) {
		at := mismatch(got, sent)
		if at < 0 {
			at = len(sent)
		}
		return fmt.Errorf("%w: the policy was sent %d prompt token ids at turn %d and says it read %d, which differ at token %d: it must continue the ids it is sent as they are", ErrTokenIn, len(sent), turn, len(got), at)
	}
	t.rendered, t.reply = n, s.TokenIDs
	return nil
}
