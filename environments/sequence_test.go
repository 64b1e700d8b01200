package environments_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/policy"
)

// templated is a policy with a byte tokenizer and a chat template in the
// style of current chat models: each message is its role's marker, its
// content's bytes and an end-of-turn token; the prompt ends with the
// assistant's marker; a reply is its text's bytes and the end-of-turn
// token, which is also EOS. With pad == eos the end-of-turn token is id
// 0, the padding id, as in models whose PAD is their EOS. rewrite makes
// the template drop the end token of earlier replies (a template that
// re-renders history), so that prompts stop extending the sequence.
type templated struct {
	eos     int32
	rewrite bool
	replies []string
}

const (
	roleUser      = 1
	roleAssistant = 2
	byteBase      = 10
)

func (p *templated) render(msgs []policy.Message) []int32 {
	var ids []int32
	for _, m := range msgs {
		role := int32(roleUser)
		if m.Role == "assistant" {
			role = roleAssistant
		}
		ids = append(ids, role)
		for _, b := range []byte(m.Content) {
			ids = append(ids, byteBase+int32(b))
		}
		if !(p.rewrite && m.Role == "assistant") {
			ids = append(ids, p.eos)
		}
	}
	return append(ids, roleAssistant)
}

func (p *templated) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	out := make([][]policy.Sample, len(reqs))
	for i, r := range reqs {
		turn := 0
		for _, m := range r.Messages {
			if m.Role == "assistant" {
				turn++
			}
		}
		prompt := p.render(r.Messages)
		if r.PromptTokenIDs != nil { // token-in: as sent; a turn per assistant marker before the last
			prompt, turn = r.PromptTokenIDs, -1
			for _, id := range prompt {
				if id == roleAssistant {
					turn++
				}
			}
		}
		text := p.replies[turn%len(p.replies)]
		var ids []int32
		var lps []float32
		for _, b := range []byte(text) {
			ids, lps = append(ids, byteBase+int32(b)), append(lps, -0.5)
		}
		ids, lps = append(ids, p.eos), append(lps, -0.25)
		out[i] = []policy.Sample{{RequestID: r.ID, Text: text, TokenIDs: ids, Logprobs: lps, FinishReason: policy.FinishStop,
			Prompt: &policy.PromptLogprobs{TokenIDs: prompt}, PolicyVersion: "templated", Status: policy.StatusOK}}
	}
	return out, nil
}

// countdown is an environment that ends after its budget of steps,
// answering each action with "n left".
type countdown struct {
	steps, left int
}

func (c *countdown) Reset(ctx context.Context, id string) (string, error) {
	c.left = c.steps
	return "go", nil
}

func (c *countdown) Step(ctx context.Context, action string) (environments.Step, error) {
	c.left--
	return environments.Step{Observation: fmt.Sprintf("%d left", c.left), Done: c.left == 0, Reward: 1}, nil
}

func (c *countdown) End() error { return nil }

// spell spells a string in the templated policy's bytes.
func spell(s string) []int32 {
	var ids []int32
	for _, b := range []byte(s) {
		ids = append(ids, byteBase+int32(b))
	}
	return ids
}

func zeros(n int) []int32 { return make([]int32, n) }

func ones(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = 1
	}
	return out
}

func cat(parts ...[]int32) []int32 {
	var out []int32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// The mask covers exactly the policy's tokens: each reply's bytes and its
// end token, and nothing of the prompt, the observations or the
// template's markers — also when the end token is the padding id, which
// appears in the prompt too, and when the episode is truncated.
func TestEpisodeSequenceAndMask(t *testing.T) {
	for _, c := range []struct {
		name      string
		eos       int32
		steps     int
		maxTurns  int
		status    string
		wantSeq   []int32
		wantTrain []int32
	}{
		{name: "two turns", eos: 3, steps: 2, maxTurns: 4, status: tables.StatusOK,
			wantSeq: cat([]int32{roleUser}, spell("go"), []int32{3, roleAssistant}, spell("ab"), []int32{3},
				[]int32{roleUser}, spell("1 left"), []int32{3, roleAssistant}, spell("c"), []int32{3}),
			wantTrain: cat(zeros(5), ones(3), zeros(9), ones(2))},
		{name: "pad is eos", eos: 0, steps: 2, maxTurns: 4, status: tables.StatusOK,
			wantSeq: cat([]int32{roleUser}, spell("go"), []int32{0, roleAssistant}, spell("ab"), []int32{0},
				[]int32{roleUser}, spell("1 left"), []int32{0, roleAssistant}, spell("c"), []int32{0}),
			wantTrain: cat(zeros(5), ones(3), zeros(9), ones(2))},
		{name: "truncated", eos: 0, steps: 9, maxTurns: 2, status: tables.StatusTruncated,
			wantSeq: cat([]int32{roleUser}, spell("go"), []int32{0, roleAssistant}, spell("ab"), []int32{0},
				[]int32{roleUser}, spell("8 left"), []int32{0, roleAssistant}, spell("c"), []int32{0}),
			wantTrain: cat(zeros(5), ones(3), zeros(9), ones(2))},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &templated{eos: c.eos, replies: []string{"ab", "c"}}
			r, err := environments.NewRunner(p, &environments.RunnerOptions{MaxTurns: c.maxTurns, Sampling: policy.Sampling{MaxTokens: 4, Temperature: 1, Logprobs: true, PromptLogprobs: true}})
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Run(context.Background(), &countdown{steps: c.steps}, environments.Episode{ID: "e1"})
			if err != nil {
				t.Fatal(err)
			}
			tr := res.Trajectory
			if tr.Status != c.status || res.Unaligned != "" {
				t.Fatalf("status %s (%s), unaligned %q", tr.Status, deref(tr.Error), res.Unaligned)
			}
			if !reflect.DeepEqual(tr.Sequence, c.wantSeq) || !reflect.DeepEqual(tr.Trainable, c.wantTrain) {
				t.Errorf("sequence %v\n    mask %v\nwant     %v\n    mask %v", tr.Sequence, tr.Trainable, c.wantSeq, c.wantTrain)
			}
			// The trainable tokens are exactly the replies', in order.
			var policyTokens []int32
			for i, m := range tr.Trainable {
				if m == 1 {
					policyTokens = append(policyTokens, tr.Sequence[i])
				}
			}
			if !reflect.DeepEqual(policyTokens, tr.TokenIDs) {
				t.Errorf("the masked tokens %v are not the replies' %v", policyTokens, tr.TokenIDs)
			}
		})
	}
}

// A template that rewrites earlier turns breaks the prefix rule: the
// episode keeps its turns and replies but has no sequence, and says why;
// so does a policy that returns no prompt token ids.
func TestEpisodeWithoutAnExactSequence(t *testing.T) {
	run := func(p policy.Policy, s policy.Sampling) environments.Result {
		t.Helper()
		r, err := environments.NewRunner(p, &environments.RunnerOptions{MaxTurns: 4, Sampling: s})
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.Run(context.Background(), &countdown{steps: 2}, environments.Episode{ID: "e1"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run(&templated{eos: 3, rewrite: true, replies: []string{"ab", "c"}}, policy.Sampling{MaxTokens: 4, Temperature: 1, PromptLogprobs: true})
	want := "the prompt of turn 1 does not begin with the 8 tokens of the turns before it (they differ at token 7): the policy's template or tokenizer rewrote the earlier turns"
	if res.Unaligned != want || res.Trajectory.Sequence != nil || res.Trajectory.Trainable != nil || res.Trajectory.Status != tables.StatusOK {
		t.Errorf("rewriting template: unaligned %q, sequence %v\nwant %q", res.Unaligned, res.Trajectory.Sequence, want)
	}
	if len(res.Trajectory.TokenIDs) != 5 {
		t.Errorf("the replies' tokens are kept: %v", res.Trajectory.TokenIDs)
	}
	res = run(environments.Scripted(func([]policy.Message) string { return "x" }), policy.Sampling{MaxTokens: 4, Temperature: 1})
	if !strings.HasPrefix(res.Unaligned, "the policy returned no prompt token ids at turn 0") {
		t.Errorf("a policy without token ids: %q", res.Unaligned)
	}
}
