package pipeline

import (
	"context"

	"github.com/rlpipe/rlpipe/artifacts/runs"
)

// EvalConfig says when and on what the loop evaluates checkpoints.
type EvalConfig struct {
	// Every evaluates every Every-th iteration's adapter; 0 turns
	// evaluation off.
	Every int
	// Set is the eval set, a prompts table; Name names it ("heldout").
	Set  Artifact
	Name string
}

// Names of the evaluation's steps: the generate and score calls of a
// checkpoint, and with StartSuffix those of the starting policy.
const (
	StepEvalGenerate = "eval-generate"
	StepEval         = "eval"
	StartSuffix      = "-start"
)

// EvalSteps are the loop's evaluation as steps after train: with
// c.Every > 0 the starting policy in the first iteration
// (eval-generate-start, eval-start; checkpoint 0) and the adapter of
// every Every-th iteration and of the last (eval-generate, eval). Each
// checkpoint's eval set is sampled by gen (inputs prompts and policy,
// output trajectories) and scored by score (inputs prompts,
// trajectories and policy), with params {checkpoint}, into
// runs.EvalDir(checkpoint, set) (000000 is the starting policy). They
// are separate tasks so that a new metric or reward reuses stored
// generations.
func EvalSteps(c EvalConfig, gen, score *Task) []Step {
	start := evalPair(gen, score, c, StartSuffix, StepInput{Name: "policy", From: FromStart, Output: "policy"},
		func(int) int { return 0 })
	every := evalPair(gen, score, c, "", StepInput{Name: "policy", From: SlotTrain, Output: OutAdapter},
		func(n int) int { return n })
	start[0].When = func(n, _ int) bool { return c.Every > 0 && n == 1 }
	every[0].When = func(n, last int) bool { return c.Every > 0 && (n%c.Every == 0 || n == last) }
	start[1].When, every[1].When = start[0].When, every[0].When
	return append(start, every...)
}

// evalPair are the generate and score steps of one evaluation, the policy
// read from policy, of checkpoint(n) in iteration n.
func evalPair(gen, score *Task, c EvalConfig, suffix string, policy StepInput, checkpoint func(n int) int) []Step {
	set := c.Name
	if set == "" {
		set = "heldout"
	}
	prompts := StepInput{Name: "prompts", Artifact: c.Set}
	params := func(n int) map[string]int { return map[string]int{"checkpoint": checkpoint(n)} }
	dir := func(n int) string { return runs.EvalDir(checkpoint(n), set) }
	g := Step{Name: StepEvalGenerate + suffix, Task: gen, After: SlotTrain,
		Inputs: []StepInput{prompts, policy}, Outputs: []string{OutTrajectories}, Params: params, Dir: dir}
	s := Step{Name: StepEval + suffix, Task: score, After: g.Name,
		Inputs: []StepInput{prompts, From(g.Name, OutTrajectories), policy}, Params: params, Dir: dir}
	if score != nil {
		for _, o := range score.Outputs {
			s.Outputs = append(s.Outputs, o.Name)
		}
	}
	return []Step{g, s}
}

// Evaluate adds a checkpoint's evaluation to an iteration, out of the
// loop (rlpipe eval): the steps gen and score of EvalSteps on the eval
// set, with the checkpoint's adapter (nil: the base model), writing to
// runs.EvalDir(checkpoint, set). suffix distinguishes call names within
// one iteration (StartSuffix for the starting policy). It returns the
// score call.
func Evaluate(ctx context.Context, it *Iteration, gen, score *Task, evalSet Artifact, adapter *Artifact, checkpoint int, set, suffix string) *Node {
	u := upstream{nodes: map[string]*Node{}, start: adapter}
	var last *Node
	for _, s := range evalPair(gen, score, EvalConfig{Set: evalSet, Name: set}, suffix, StepInput{Name: "policy", From: FromStart, Output: "policy"},
		func(int) int { return checkpoint }) {
		last = u.goStep(ctx, it, s, checkpoint)
	}
	return last
}

// EvalTasks are the generate and score tasks of the evaluation among
// steps (EvalSteps), and its config's eval set; ok is false without one.
func EvalTasks(steps []Step) (gen, score *Task, set Artifact, ok bool) {
	for _, s := range steps {
		switch s.Name {
		case StepEvalGenerate:
			gen = s.Task
			set = s.Inputs[0].Artifact
		case StepEval:
			score = s.Task
		}
	}
	return gen, score, set, gen != nil && score != nil
}
