// Package gsm8kmathverify holds the tests of the math-verify reward
// (reward-math-verify.yaml) and of its example: a run of pipeline.yaml
// rescored with it. See README.md.
package gsm8kmathverify

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/examples/exampletest"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/python"
	"github.com/rlpipe/rlpipe/rewards/rewardstest"
)

// mathVerifySpec is reward-math-verify.yaml as shipped, its python: the
// project venv internal/pyvenv finds and its function file by absolute
// path, so it can be written anywhere. The test is skipped without the
// venv, or when the sandbox's user cannot read its interpreter.
func mathVerifySpec(t *testing.T) string {
	t.Helper()
	venv := filepath.Dir(filepath.Dir(pyvenv.Python(t, "score with math-verify")))
	if _, err := python.Find(context.Background(), venv); errors.Is(err, python.ErrUnreachable) {
		t.Skipf("the sandbox cannot run the project venv: %v", err)
	}
	return exampletest.Config(t, "reward-math-verify.yaml", map[string]string{
		"python: ../../.venv-py":                           "python: " + venv,
		"function: rewards/math_verify_reward.py:accuracy": "function: " + exampletest.Abs(t, "rewards/math_verify_reward.py") + ":accuracy",
	})
}

// The shipped reward on one batch of rows, each case a row of it: plain
// and LaTeX answers, an episode, and the bad inputs — a completion
// math-verify cannot parse (a wrong answer, 0), a reference it cannot
// parse (not scored: status error, the rest of the batch scored), and a
// comparison that runs past math-verify's own 5 s timeout (its SIGALRM
// works in the sandboxed worker: False, so 0, well inside the worker's
// one-minute wall limit that would otherwise end the batch).
func TestMathVerifyReward(t *testing.T) {
	p := rewardstest.Program(t, "reward-math-verify.yaml", mathVerifySpec(t))
	huge, huger := `$2^{2^{2^{2^{30}}}}$`, `$3^{3^{3^{3^{30}}}}$`
	cases := []struct {
		name, completion, answer string
		messages                 bool // the completion is an episode's last turn
		status                   string
		score                    float64
		err                      string
	}{
		{name: "gsm8k format, right", completion: "12 plus 30 is 42.\n#### 42", answer: "42", status: "ok", score: 1},
		{name: "thousands separator", completion: "#### 1,320", answer: "1320", status: "ok", score: 1},
		{name: "wrong number", completion: "The answer is 41.", answer: "42", status: "ok", score: 0},
		{name: "equivalent fraction in boxed", completion: `so $\boxed{\frac{2}{4}}$`, answer: `\frac{1}{2}`, status: "ok", score: 1},
		{name: "decimal against fraction", completion: "1/2", answer: "0.5", status: "ok", score: 1},
		{name: "bare latex reference", completion: `$\sqrt{2}$`, answer: `\sqrt{2}`, status: "ok", score: 1},
		{name: "episode", completion: `\boxed{7}`, messages: true, answer: "7", status: "ok", score: 1},
		{name: "completion does not parse", completion: "I cannot tell.", answer: "42", status: "ok", score: 0},
		{name: "empty completion", completion: "", answer: "42", status: "ok", score: 0},
		{name: "reference does not parse", completion: "42", answer: "n/a", status: rewards.StatusError,
			err: "function accuracy returned None: not scored"},
		{name: "empty reference", completion: "42", answer: "", status: rewards.StatusError,
			err: "function accuracy returned None: not scored"},
		{name: "comparison times out", completion: huger, answer: huge, status: "ok", score: 0},
	}
	var trajs []tables.Trajectory
	var prompts []tables.Prompt
	for i, c := range cases {
		id := c.name
		tr := tables.Trajectory{PromptID: id, GroupID: id, SampleIndex: int32(i), Completion: c.completion, Status: tables.StatusOK}
		if c.messages {
			tr.Completion = ""
			outcome := `{"reward": null, "info": {}}`
			tr.EnvOutcome = &outcome
			tr.Turns = []tables.Turn{{Role: "user", Content: "7?"}, {Role: "assistant", Content: c.completion}}
		}
		trajs = append(trajs, tr)
		prompts = append(prompts, tables.Prompt{PromptID: id, Prompt: "question", Answer: c.answer})
	}
	got := rewardstest.ScoreRows(t, p, trajs, prompts)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := got[i]
			msg := ""
			if r.Error != nil {
				msg = *r.Error
			}
			if r.Status != c.status || msg != c.err || c.status == "ok" && r.Components["correct"] != c.score {
				t.Fatalf("got status %q, correct %v, error %q; want %q, %v, %q", r.Status, r.Components["correct"], msg, c.status, c.score, c.err)
			}
		})
	}
}

// pipeline.yaml as shipped (two iterations of the embedded tiny-arith on
// train.jsonl, scored by reward.yaml's CEL exact match), then `rlpipe
// rescore` with reward-math-verify.yaml. Both specs have one component,
// correct, of weight 1, so a sample's totals agree when both rewards
// judge it alike: math-verify agrees with the CEL reward on all 256
// samples (16 prompts × 8 samples × 2 iterations; 67 right by both).
// A second rescoring is all cache hits. Then the spec serves as a run's
// reward (pipeline.yaml with spec: reward-math-verify.yaml): its rewards
// are the CEL run's, row by row.
func TestRescoreWithMathVerify(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline and two rescorings (about 20 s); without -short it runs")
	}
	spec := mathVerifySpec(t)
	e := exampletest.New(t, nil)
	cfg := e.Write("pipeline.yaml", exampletest.Config(t, "pipeline.yaml", nil))
	e.Write("reward.yaml", exampletest.Config(t, "reward.yaml", nil))
	mv := e.Write("reward-math-verify.yaml", spec)
	e.Rlpipe("init-store")
	e.Rlpipe("dataset", "import", exampletest.Abs(t, "train.jsonl"), "main:data/gsm8k-mini.parquet", "--answer-format", "gsm8k")
	e.Rlpipe("run", "-f", cfg, "--no-report")

	var rep tables.RescoreReport
	e.JSON(&rep, "rescore", "--from", "runs-gsm8k-mini", "--reward", mv, "--branch", "math-verify")
	c := rep.Comparison
	if len(rep.Iterations) != 2 || rep.Cached != 0 || c.Samples != 256 || c.Scored != 256 || c.Changed != 0 || c.Spearman != 1 ||
		c.ZeroToNonzeroGroups != 0 || c.NonzeroToZeroGroups != 0 {
		t.Fatalf("rescore: %+v", rep)
	}
	if len(c.Components) != 2 || c.Components[0].Name != "correct" || c.Components[0].Old == nil || c.Components[0].New == nil ||
		c.Components[0].Old.Mean != 67.0/256 || c.Components[0].New.Mean != 67.0/256 {
		t.Fatalf("rescore components: %+v", c.Components)
	}
	e.JSON(&rep, "rescore", "--from", "runs-gsm8k-mini", "--reward", mv, "--branch", "math-verify")
	if rep.Cached != 2 || rep.Comparison.Changed != 0 {
		t.Fatalf("second rescore: %d iterations cached, %d changed; want 2, 0", rep.Cached, rep.Comparison.Changed)
	}

	// The spec as the run's reward: the same rewards, row by row.
	e.Rlpipe("run", "-f", e.Write("pipeline-mv.yaml", exampletest.Config(t, "pipeline.yaml", map[string]string{
		"run: gsm8k-mini": "run: gsm8k-mv", "spec: reward.yaml": "spec: reward-math-verify.yaml"})), "--no-report")
	st := e.Open()
	for it := 1; it <= 2; it++ {
		cel := standintest.ReadRows(t, st, "runs-gsm8k-mini", runs.IterationPath(it, runs.RewardsFile), tables.Rewards)
		fn := standintest.ReadRows(t, st, "runs-gsm8k-mv", runs.IterationPath(it, runs.RewardsFile), tables.Rewards)
		if len(cel) != 128 || len(fn) != len(cel) {
			t.Fatalf("iteration %d: %d rewards of the CEL run, %d of math-verify's; want 128 each", it, len(cel), len(fn))
		}
		for i := range cel {
			if fn[i].PromptID != cel[i].PromptID || fn[i].SampleIndex != cel[i].SampleIndex || fn[i].Status != rewards.StatusOK || fn[i].Total != cel[i].Total {
				t.Fatalf("iteration %d row %d: math-verify's run %+v, the CEL run's %+v", it, i, fn[i], cel[i])
			}
		}
	}
}
