package environments_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/arith"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/policy/toolcall"
)

var _ environments.Renderer = (*tiny.Model)(nil)

// Suffix renders the templated policy's template after a reply: the end
// token the template closes an assistant turn with, unless the reply
// sampled it (a rewriting template closes none), then msgs and the
// assistant's marker.
func (p *templated) Suffix(_ context.Context, _ []policy.Message, reply []int32, msgs []policy.Message, _ []toolcall.Tool) ([]int32, error) {
	var out []int32
	if reply != nil && !p.rewrite && (len(reply) == 0 || reply[len(reply)-1] != p.eos) {
		out = append(out, p.eos)
	}
	return append(out, p.render(msgs)...), nil
}

// The embedded model's template never rewrites history, so an episode
// run token-in/token-out is the same row, bit for bit, as one sent as
// chat messages: the same prompts, replies, logprobs, sequence and mask.
// The cases cover a reply cut at max_tokens (no EOS: the renderer closes
// it, as the chat path does) and a wrong answer.
func TestTokenInMatchesChatForTheEmbeddedModel(t *testing.T) {
	m, err := tiny.EmbeddedChain()
	if err != nil {
		t.Fatal(err)
	}
	p := tiny.NewPolicy(m)
	for _, c := range []struct {
		name      string
		problem   arith.Problem
		maxTokens int
		sample    int32
	}{
		{name: "answers right", problem: arith.Problem{A: 590, B: 235}, maxTokens: 5},
		{name: "another sample", problem: arith.Problem{A: 17, B: 408}, maxTokens: 5, sample: 3},
		{name: "replies cut at max tokens", problem: arith.Problem{A: 590, B: 235}, maxTokens: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := func(r environments.Renderer) environments.Result {
				t.Helper()
				runner := newRunner(t, p, &environments.RunnerOptions{Seed: 1, MaxTurns: 3, Renderer: r,
					Sampling: policy.Sampling{Temperature: 1, MaxTokens: c.maxTokens, Logprobs: true, PromptLogprobs: true}})
				res, err := runner.Run(context.Background(), arith.NewChain(c.problem, nil), environments.Episode{ID: "chain", SampleIndex: c.sample})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			chat, tokens := run(nil), run(m)
			if chat.Unaligned != "" || chat.Trajectory.Sequence == nil {
				t.Fatalf("the chat path has no sequence: %s", chat.Unaligned)
			}
			if !reflect.DeepEqual(chat, tokens) {
				t.Errorf("token-in/token-out differs from chat:\n chat %+v\ntoken %+v", chat.Trajectory, tokens.Trajectory)
			}
		})
	}
}

// A template that drops the end token of earlier replies breaks the
// prefix rule of the chat path (the episode has no sequence and is not
// trained on); run token-in/token-out, the same policy continues the
// sequence rlpipe holds, and the episode has the exact sequence and mask
// a template that does not rewrite gives.
func TestTokenInSurvivesARewritingTemplate(t *testing.T) {
	want := cat([]int32{roleUser}, spell("go"), []int32{3, roleAssistant}, spell("ab"), []int32{3},
		[]int32{roleUser}, spell("1 left"), []int32{3, roleAssistant}, spell("c"), []int32{3})
	wantMask := cat(zeros(5), ones(3), zeros(9), ones(2))
	for _, c := range []struct {
		name      string
		rewrite   bool
		tokenIn   bool
		unaligned string
	}{
		{name: "chat, template keeps history", rewrite: false, tokenIn: false},
		{name: "chat, template rewrites history", rewrite: true, tokenIn: false,
			unaligned: "the prompt of turn 1 does not begin with the 8 tokens of the turns before it (they differ at token 7): the policy's template or tokenizer rewrote the earlier turns"},
		{name: "token-in, template keeps history", rewrite: false, tokenIn: true},
		{name: "token-in, template rewrites history", rewrite: true, tokenIn: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &templated{eos: 3, rewrite: c.rewrite, replies: []string{"ab", "c"}}
			o := &environments.RunnerOptions{MaxTurns: 4, Sampling: policy.Sampling{MaxTokens: 4, Temperature: 1, Logprobs: true}}
			if c.tokenIn {
				o.Renderer = p
			} else {
				o.Sampling.PromptLogprobs = true
			}
			res, err := newRunner(t, p, o).Run(context.Background(), &countdown{steps: 2}, environments.Episode{ID: "e1"})
			if err != nil {
				t.Fatal(err)
			}
			tr := res.Trajectory
			if tr.Status != tables.StatusOK || res.Unaligned != c.unaligned {
				t.Fatalf("status %s (%s), unaligned %q; want ok, %q", tr.Status, deref(tr.Error), res.Unaligned, c.unaligned)
			}
			if c.unaligned != "" {
				if tr.Sequence != nil || tr.Trainable != nil {
					t.Errorf("an unaligned episode has sequence %v, mask %v", tr.Sequence, tr.Trainable)
				}
				return
			}
			if !reflect.DeepEqual(tr.Sequence, want) || !reflect.DeepEqual(tr.Trainable, wantMask) {
				t.Errorf("sequence %v\n    mask %v\nwant     %v\n    mask %v", tr.Sequence, tr.Trainable, want, wantMask)
			}
		})
	}
}

// echoing is a templated policy that says it read other prompt token ids
// than it was sent (a server that re-tokenized them), or returns no token
// ids at all.
type echoing struct {
	templated
	noTokens bool
}

func (p *echoing) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	out, err := p.templated.Generate(ctx, reqs, s)
	for _, ss := range out {
		if p.noTokens {
			ss[0].TokenIDs, ss[0].Prompt = nil, nil
			continue
		}
		ss[0].Prompt.TokenIDs = append([]int32{99}, ss[0].Prompt.TokenIDs[1:]...)
	}
	return out, err
}

// failRender is a Renderer that fails with err.
type failRender struct{ err error }

func (f failRender) Suffix(context.Context, []policy.Message, []int32, []policy.Message, []toolcall.Tool) ([]int32, error) {
	return nil, f.err
}

// What token-in/token-out cannot work with fails the whole call, saying
// what to change (a policy without token ids, or one that does not
// continue the ids it is sent); a renderer that fails ends the episode as
// env_error, or infra_error when its machinery failed.
func TestTokenInFaults(t *testing.T) {
	for _, c := range []struct {
		name     string
		p        policy.Policy
		r        environments.Renderer
		err      string
		status   string
		reason   string
		errIsTIO bool
	}{
		{name: "no token ids", p: &echoing{templated: templated{eos: 3, replies: []string{"ab"}}, noTokens: true},
			err:      "episode e1: token-in/token-out episode: the policy returned no token ids for its reply at turn 0; use a policy that returns them (the embedded model, vLLM's completions with return_token_ids)",
			errIsTIO: true},
		{name: "prompt ids rewritten", p: &echoing{templated: templated{eos: 3, replies: []string{"ab"}}},
			err:      "episode e1: token-in/token-out episode: the policy was sent 5 prompt token ids at turn 0 and says it read 5, which differ at token 0: it must continue the ids it is sent as they are",
			errIsTIO: true},
		{name: "renderer cannot render", p: &templated{eos: 3, replies: []string{"ab"}}, r: failRender{errors.New(`message 1 (user): character "é" at column 3: not in the vocabulary`)},
			status: tables.StatusEnvError, reason: `render turn 0: message 1 (user): character "é" at column 3: not in the vocabulary`},
		{name: "renderer's machinery fails", p: &templated{eos: 3, replies: []string{"ab"}}, r: failRender{fmt.Errorf("chat template worker exited: %w", environments.ErrInfra)},
			status: tables.StatusInfraError, reason: "render turn 0: chat template worker exited: environment infrastructure failure"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.r
			if r == nil {
				r = &templated{eos: 3}
			}
			res, err := newRunner(t, c.p, &environments.RunnerOptions{MaxTurns: 4, Renderer: r,
				Sampling: policy.Sampling{MaxTokens: 4, Temperature: 1}}).Run(context.Background(), &countdown{steps: 2}, environments.Episode{ID: "e1"})
			if c.err != "" {
				if err == nil || err.Error() != c.err || errors.Is(err, environments.ErrTokenIn) != c.errIsTIO {
					t.Fatalf("Run = %v\nwant %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tr := res.Trajectory; tr.Status != c.status || deref(tr.Error) != c.reason {
				t.Errorf("status %s (%s), want %s (%s)", tr.Status, deref(tr.Error), c.status, c.reason)
			}
		})
	}
}

// promptless is a templated policy that does not echo the prompt's ids
// (vLLM's completions without prompt logprobs may not).
type promptless struct{ templated }

func (p *promptless) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	out, err := p.templated.Generate(ctx, reqs, s)
	for _, ss := range out {
		ss[0].Prompt = nil
	}
	return out, err
}

// Token-in, the ids sent are the turn's prompt: the sequence and the
// token budget count them when the policy does not echo them.
func TestTokenInCountsTheIDsSent(t *testing.T) {
	p := &promptless{templated{eos: 3, rewrite: true, replies: []string{"ab", "c"}}}
	res, err := newRunner(t, p, &environments.RunnerOptions{MaxTurns: 4, MaxEpisodeTokens: 18, Renderer: p,
		Sampling: policy.Sampling{MaxTokens: 4, Temperature: 1}}).Run(context.Background(), &countdown{steps: 2}, environments.Episode{ID: "e1"})
	if err != nil {
		t.Fatal(err)
	}
	tr := res.Trajectory
	want := "token budget of 18 tokens passed at turn 1: its prompt held 17 tokens and its reply 2"
	if tr.Status != tables.StatusTruncated || deref(tr.Error) != want || res.Unaligned != "" || len(tr.Sequence) != 19 {
		t.Errorf("status %s (%s), unaligned %q, %d tokens; want truncated (%s), 19 tokens", tr.Status, deref(tr.Error), res.Unaligned, len(tr.Sequence), want)
	}
}
