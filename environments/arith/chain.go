package arith

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
)

// DefaultChainSteps is how many terms a Chain adds after its problem.
const DefaultChainSteps = 1

// ChainOptions tune a Chain. A nil *ChainOptions means the defaults.
type ChainOptions struct {
	// Steps is the number of terms after the problem (default
	// DefaultChainSteps): the episode asks for Steps+1 answers.
	Steps int `json:"steps,omitempty"`
}

// Chain is a multi-turn arithmetic episode in the embedded model's
// vocabulary: a running sum. It opens with its problem's prompt, "a+b=";
// each right answer (the sum so far, as the reply's whole text) is
// followed by the next problem, the sum plus a term d from 1 to 9, until
// Steps terms are answered. A wrong answer ends the episode.
//
//	123+45=168⏎168+1=169⏎   (⏎: the reply's EOS; Steps 1)
//
// With operands up to MaxOperand, the default of one term keeps an
// episode within the embedded model's context of 32 tokens. The terms
// come from the episode id (environments.RNG), so the G episodes of a
// prompt share one chain. Each right answer's step reward is
// 1/(Steps+1), so the episode's reward is the fraction answered; the info
// records "correct" (answers right), "answers" (Steps+1) and "solved"
// (all right), which a reward spec reads as outcome.info.
type Chain struct {
	p          Problem
	steps      int
	terms      []int
	sum, right int
	active     bool
}

var _ environments.Env = (*Chain)(nil)

// NewChain returns the chain of problem p.
func NewChain(p Problem, o *ChainOptions) *Chain {
	steps := DefaultChainSteps
	if o != nil && o.Steps > 0 {
		steps = o.Steps
	}
	return &Chain{p: p, steps: steps}
}

// ChainOf returns the chain of a prompts-table row of an arith problem:
// its operands from its metadata {"a", "b"}, or from its id.
func ChainOf(row tables.Prompt, o *ChainOptions) (*Chain, error) {
	var ab struct{ A, B *int }
	if row.Metadata != "" && json.Unmarshal([]byte(row.Metadata), &ab) == nil && ab.A != nil && ab.B != nil {
		return NewChain(Problem{A: *ab.A, B: *ab.B}, o), nil
	}
	p, err := ParseID(row.PromptID)
	if err != nil {
		return nil, fmt.Errorf("prompt %s is not an arith problem (metadata {\"a\", \"b\"} or an id arith-A+B): %w", row.PromptID, err)
	}
	return NewChain(p, o), nil
}

// Reset draws the chain's terms from the episode id and asks for the
// problem's sum.
func (c *Chain) Reset(_ context.Context, id string) (string, error) {
	r := environments.RNG(id)
	c.sum, c.right, c.active = c.p.A+c.p.B, 0, true
	c.terms = c.terms[:0]
	sum := c.sum
	for range c.steps {
		d := 1 + r.IntN(9)
		sum += d
		c.terms = append(c.terms, d)
	}
	return c.p.Prompt(), nil
}

// Step checks an answer: the reply's text, spaces trimmed, must be the
// sum so far in decimal.
func (c *Chain) Step(_ context.Context, action string) (environments.Step, error) {
	if !c.active {
		return environments.Step{}, errors.New("chain: Step without an episode: call Reset first")
	}
	answers := c.steps + 1
	ok := strings.TrimSpace(action) == strconv.Itoa(c.sum)
	if ok {
		c.right++
	}
	info := map[string]any{"correct": c.right, "answers": answers, "solved": c.right == answers}
	if !ok || c.right == answers {
		c.active = false
		st := environments.Step{Done: true, Info: info}
		if ok {
			st.Reward = 1 / float64(answers)
		}
		return st, nil
	}
	d := c.terms[c.right-1]
	prev := c.sum
	c.sum += d
	return environments.Step{Observation: fmt.Sprintf("%d+%d=", prev, d), Reward: 1 / float64(answers), Info: info}, nil
}

// End ends the episode.
func (c *Chain) End() error {
	c.active = false
	return nil
}

// ChainEnv is Chain as an episodes stage's rl_env (environments/episodes):
// rl_options are ChainOptions, and each episode's chain is its prompt's
// problem (ChainOf).
var ChainEnv = environments.Typed("chain", openChain)

// openChain returns the maker of chains with the options.
func openChain(o *ChainOptions, _ string) (environments.Maker, string, error) {
	if o != nil && o.Steps < 0 {
		return nil, "", fmt.Errorf("steps: %d is negative", o.Steps)
	}
	return func(p tables.Prompt) (environments.Env, error) { return ChainOf(p, o) }, "", nil
}
