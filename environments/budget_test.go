package environments_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/arith"
	"github.com/rlpipe/rlpipe/environments/guess"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// The token budget bounds the episode's whole token sequence: prompts,
// observations and replies. An episode past it ends truncated at the turn
// that passed it, that turn's reply kept in the row (turns, token ids,
// sequence and mask) but not passed to the environment; one that fits,
// even exactly, ends as it would without a budget. The episode is chain
// 590+235 played by the shipped tiny-chain model with a fixed seed: it
// answers both questions right in 22 tokens, 8 + 4 for the first turn
// (its prompt, its reply and EOS) and 6 + 4 for the second.
func TestTokenBudget(t *testing.T) {
	m, err := tiny.EmbeddedChain()
	if err != nil {
		t.Fatal(err)
	}
	p := tiny.NewPolicy(m)
	first := []int32{8, 12, 3, 13, 5, 6, 8, 15} // 590+235=
	reply1 := []int32{11, 5, 8, 2}              // 825 EOS
	second := []int32{11, 5, 8, 13, 5, 15}      // 825+2=
	reply2 := []int32{11, 5, 10, 2}             // 827 EOS
	whole, wholeMask := cat(first, reply1, second, reply2), cat(zeros(8), ones(4), zeros(6), ones(4))
	for _, c := range []struct {
		name    string
		budget  int
		status  string
		reason  string
		replies []string
		seq     []int32
		mask    []int32
		outcome string
	}{
		{name: "no budget", budget: 0, status: tables.StatusOK, replies: []string{"825", "827"}, seq: whole, mask: wholeMask,
			outcome: `{"reward":1,"info":{"answers":2,"correct":2,"solved":true}}`},
		{name: "fits exactly", budget: 22, status: tables.StatusOK, replies: []string{"825", "827"}, seq: whole, mask: wholeMask,
			outcome: `{"reward":1,"info":{"answers":2,"correct":2,"solved":true}}`},
		{name: "passed at the second turn", budget: 21, status: tables.StatusTruncated,
			reason:  "token budget of 21 tokens passed at turn 1: its prompt held 18 tokens and its reply 4",
			replies: []string{"825", "827"}, seq: whole, mask: wholeMask,
			outcome: `{"reward":0.5,"info":{"answers":2,"correct":1,"solved":false}}`},
		{name: "passed at the first turn", budget: 11, status: tables.StatusTruncated,
			reason:  "token budget of 11 tokens passed at turn 0: its prompt held 8 tokens and its reply 4",
			replies: []string{"825"}, seq: cat(first, reply1), mask: cat(zeros(8), ones(4)),
			outcome: `{"reward":0,"info":{}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRunner(t, p, &environments.RunnerOptions{MaxEpisodeTokens: c.budget, Seed: 1,
				Sampling: policy.Sampling{Temperature: 1, MaxTokens: 5, Logprobs: true, PromptLogprobs: true}})
			res, err := r.Run(context.Background(), arith.NewChain(arith.Problem{A: 590, B: 235}, nil), environments.Episode{ID: "arith-590+235"})
			if err != nil {
				t.Fatal(err)
			}
			tr := res.Trajectory
			if got := replies(tr); tr.Status != c.status || deref(tr.Error) != deref(strPtrOrNil(c.reason)) || !reflect.DeepEqual(got, c.replies) {
				t.Fatalf("status %s (%s), replies %q; want %s (%s), %q", tr.Status, deref(tr.Error), got, c.status, c.reason, c.replies)
			}
			if res.Unaligned != "" || !reflect.DeepEqual(tr.Sequence, c.seq) || !reflect.DeepEqual(tr.Trainable, c.mask) {
				t.Errorf("sequence %v\n    mask %v (%s)\nwant     %v\n    mask %v", tr.Sequence, tr.Trainable, res.Unaligned, c.seq, c.mask)
			}
			var trained []int32
			for i, m := range tr.Trainable {
				if m == 1 {
					trained = append(trained, tr.Sequence[i])
				}
			}
			if !reflect.DeepEqual(trained, tr.TokenIDs) || len(tr.Logprobs) != len(tr.TokenIDs) {
				t.Errorf("the masked tokens %v are not the replies' %v (%d logprobs)", trained, tr.TokenIDs, len(tr.Logprobs))
			}
			if tr.EnvOutcome == nil || *tr.EnvOutcome != c.outcome {
				t.Errorf("outcome %s, want %s", deref(tr.EnvOutcome), c.outcome)
			}
		})
	}
}

func strPtrOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// A token budget cannot be kept with a policy that does not say how many
// tokens a turn took: the episode fails as a whole, saying what to change,
// rather than every row pretending to fit. Without a budget the same
// policy plays on.
func TestTokenBudgetNeedsTokenIDs(t *testing.T) {
	r := newRunner(t, environments.Scripted(bisect), &environments.RunnerOptions{MaxEpisodeTokens: 64})
	_, err := r.Run(context.Background(), guess.New(nil), environments.Episode{ID: "guess-0001"})
	if err == nil || !strings.Contains(err.Error(), "episode guess-0001 turn 0: a token budget (64) is set but the policy returned no token ids for the turn's prompt or reply") {
		t.Fatalf("Run = %v", err)
	}
	if _, err := newRunner(t, environments.Scripted(bisect), nil).Run(context.Background(), guess.New(nil), environments.Episode{ID: "guess-0001"}); err != nil {
		t.Fatalf("without a budget: %v", err)
	}
	if _, err := environments.NewRunner(environments.Scripted(bisect), &environments.RunnerOptions{MaxEpisodeTokens: -1}); err == nil {
		t.Error("NewRunner accepted a negative token budget")
	}
}
