package arith_test

import (
	"context"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/arith"
	"github.com/rlpipe/rlpipe/policy"
)

// solver answers a chain's every question with the running sum, except
// the answer numbered wrong (from 1), which it gets wrong; 0: none.
func solver(wrong int) environments.Scripted {
	return func(msgs []policy.Message) string {
		sum, asked := 0, 0
		for _, m := range msgs {
			if m.Role != "user" {
				continue
			}
			asked++
			expr := strings.TrimSuffix(m.Content, "=")
			if a, b, ok := strings.Cut(expr, "+"); ok && a != "" {
				x, _ := strconv.Atoi(a)
				y, _ := strconv.Atoi(b)
				sum = x + y
				continue
			}
			d, _ := strconv.Atoi(expr)
			sum += d
		}
		if asked == wrong {
			return strconv.Itoa(sum + 1)
		}
		return strconv.Itoa(sum)
	}
}

func playChain(t *testing.T, row tables.Prompt, o *arith.ChainOptions, p policy.Policy) environments.Result {
	t.Helper()
	c, err := arith.ChainOf(row, o)
	if err != nil {
		t.Fatal(err)
	}
	r, err := environments.NewRunner(p, &environments.RunnerOptions{MaxTurns: 8})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background(), c, environments.Episode{ID: row.PromptID})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestChain(t *testing.T) {
	row := arith.Problem{A: 123, B: 45}.Row()
	three := &arith.ChainOptions{Steps: 2}
	res := playChain(t, row, three, solver(0))
	ok := tables.StatusOK
	want := []tables.Turn{{Role: "user", Content: "123+45=", Status: ok}, {Role: "assistant", Content: "168", Status: ok},
		{Role: "user", Content: "168+1=", Status: ok}, {Role: "assistant", Content: "169", Status: ok},
		{Role: "user", Content: "169+1=", Status: ok}, {Role: "assistant", Content: "170", Status: ok}}
	if !reflect.DeepEqual(res.Trajectory.Turns, want) {
		t.Errorf("turns %+v\nwant  %+v", res.Trajectory.Turns, want)
	}
	if res.Status() != tables.StatusOK || res.Reward != 1 || res.Info["solved"] != true || res.Info["correct"] != 3 || res.Info["answers"] != 3 {
		t.Errorf("solved: status %s, reward %v, info %v", res.Status(), res.Reward, res.Info)
	}
	// The same episode id, the same chain; the second answer wrong ends it.
	res = playChain(t, row, three, solver(2))
	if n := len(res.Trajectory.Turns); n != 4 || res.Trajectory.Turns[2].Content != "168+1=" || res.Reward != 1.0/3 || res.Info["solved"] != false || res.Info["correct"] != 1 {
		t.Errorf("a wrong second answer: %d turns %+v, reward %v, info %v", n, res.Trajectory.Turns, res.Reward, res.Info)
	}
	// Another problem, another chain.
	// The default: one more term, two answers.
	if two := playChain(t, row, nil, solver(0)); len(two.Trajectory.Turns) != 4 || two.Info["answers"] != 2 || two.Reward != 1 {
		t.Errorf("the default chain: %+v, info %v", two.Trajectory.Turns, two.Info)
	}
	// Another problem, other terms.
	if other := playChain(t, arith.Problem{A: 7, B: 0}.Row(), three, solver(0)); other.Trajectory.Turns[2].Content == "7+1=" && other.Trajectory.Turns[4].Content == "8+1=" {
		t.Errorf("two problems drew the same terms: %+v", other.Trajectory.Turns)
	}
}

// A chain's prompts and replies fit the embedded model's vocabulary and,
// for the largest problems, its context of 32 tokens (BOS and each
// reply's EOS included).
func TestChainFitsTheEmbeddedModel(t *testing.T) {
	for a := range 30 {
		row := arith.Problem{A: arith.MaxOperand - a%3, B: arith.MaxOperand - a/3}.Row()
		res := playChain(t, row, nil, solver(0))
		tokens := 1
		for _, tu := range res.Trajectory.Turns {
			if strings.Trim(tu.Content, "0123456789+=") != "" {
				t.Fatalf("problem %d: turn %+v leaves the vocabulary", a, tu)
			}
			tokens += len(tu.Content)
			if tu.Role == "assistant" {
				tokens++
			}
		}
		if tokens > 32 {
			t.Fatalf("problem %d: %d tokens: %+v", a, tokens, res.Trajectory.Turns)
		}
		if res.Info["solved"] != true {
			t.Fatalf("problem %d: %v", a, res.Info)
		}
	}
}

func TestChainOf(t *testing.T) {
	if _, err := arith.ChainOf(tables.Prompt{PromptID: "arith-12+30"}, nil); err != nil {
		t.Errorf("by id: %v", err)
	}
	if _, err := arith.ChainOf(tables.Prompt{PromptID: "q1", Metadata: `{"a": 1, "b": 2}`}, &arith.ChainOptions{Steps: 4}); err != nil {
		t.Errorf("by metadata: %v", err)
	}
	_, err := arith.ChainOf(tables.Prompt{PromptID: "q1", Metadata: `{"question": "1+2"}`}, nil)
	if want := `prompt q1 is not an arith problem (metadata {"a", "b"} or an id arith-A+B): arith id "q1": want arith-A+B`; err == nil || err.Error() != want {
		t.Errorf("neither: %v\nwant %s", err, want)
	}
	c := arith.NewChain(arith.Problem{A: 1, B: 1}, nil)
	if _, err := c.Step(context.Background(), "2"); err == nil || !strings.Contains(err.Error(), "call Reset first") {
		t.Errorf("Step before Reset: %v", err)
	}
}
