package runners_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/rewards"
)

// TRL's own reward functions (trl.rewards, installed in the project venv)
// run unchanged: accuracy_reward wants conversational completions and the
// gold answer as solution, think_format_reward the completions only.
func TestTRLRewardFunctions(t *testing.T) {
	py := pyvenv.Python(t, "run TRL's own reward functions")
	venv := filepath.Dir(filepath.Dir(py))
	spec := `functions:
  - name: accuracy
    function: trl.rewards:accuracy_reward
    python: ` + venv + `
    conversational: true
    columns: {solution: answer}
  - name: think
    function: trl.rewards:think_format_reward
    python: ` + venv + `
    conversational: true
components:
  - name: accuracy
    expr: functions.accuracy
  - name: think
    expr: functions.think
    weight: 0.5
`
	p, err := compileSpec(t, spec)
	if err != nil {
		t.Fatal(err)
	}
	row := func(completion, answer string) rewards.Row {
		return rewards.Row{Trajectory: tables.Trajectory{PromptID: "p", Completion: completion, NumTokens: 9, Status: tables.StatusOK},
			Prompt: tables.Prompt{PromptID: "p", Prompt: "What is a third?", Answer: answer}, HasPrompt: true}
	}
	for _, c := range []struct {
		name            string
		row             rewards.Row
		status          string
		accuracy, think float64
		reward          float64
	}{
		{"boxed and thought", row("<think>\nsmall\n</think>\nso \\boxed{\\frac{1}{3}}", "\\frac{1}{3}"), rewards.StatusOK, 1, 1, 1.5},
		{"wrong, no thinking", row("\\boxed{\\frac{1}{2}}", "\\frac{1}{3}"), rewards.StatusOK, 0, 0, 0},
		// accuracy_reward returns None when the gold answer does not parse.
		{"gold does not parse", row("\\boxed{1}", "no number here"), rewards.StatusError, 0, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := p.Score(context.Background(), c.row, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != c.status {
				t.Fatalf("status %s (%s), want %s", r.Status, deref(r.Error), c.status)
			}
			if c.status != rewards.StatusOK {
				if want := "function accuracy returned None: not scored"; deref(r.Error) != want {
					t.Fatalf("error %q, want %q", deref(r.Error), want)
				}
				return
			}
			if r.Components["accuracy"] != c.accuracy || r.Components["think"] != c.think || r.Total != c.reward {
				t.Fatalf("got %v reward %v, want accuracy %v think %v reward %v", r.Components, r.Total, c.accuracy, c.think, c.reward)
			}
		})
	}
}

// columns: passes a metadata field under a keyword of the function's own,
// and conversational: turns text into TRL's messages.
func TestFunctionColumns(t *testing.T) {
	needSystemPython(t)
	p, err := compileSpec(t, `functions:
  - name: level
    function: testdata/columns.py:level
    python: /usr/bin/python3
    columns: {level: metadata.level}
  - name: roles
    function: testdata/columns.py:first_role
    python: /usr/bin/python3
    conversational: true
components:
  - name: level
    expr: functions.level
  - name: roles
    expr: functions.roles
`)
	if err != nil {
		t.Fatal(err)
	}
	row := func(metadata string) rewards.Row {
		return rewards.Row{Trajectory: tables.Trajectory{PromptID: "p", Completion: "x", Status: tables.StatusOK},
			Prompt: tables.Prompt{PromptID: "p", Prompt: "q", Metadata: metadata}, HasPrompt: true}
	}
	r, err := p.Score(context.Background(), row(`{"level": 3}`), nil)
	if err != nil || r.Status != rewards.StatusOK || r.Components["level"] != 3 || r.Components["roles"] != 1 {
		t.Fatalf("got %+v (%s), %v; want level 3, roles 1", r, deref(r.Error), err)
	}
	r, err = p.Score(context.Background(), row(`{"other": 1}`), nil)
	if want := "function level returned None: not scored"; err != nil || r.Status != rewards.StatusError || deref(r.Error) != want {
		t.Fatalf("got %+v (%s), %v; want status error %q", r, deref(r.Error), err, want)
	}
}
