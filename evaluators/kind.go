package evaluators

import (
	"errors"
	"fmt"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/policy"
)

// Steps are the eval section's steps (a kind.StepSource for
// kind.Registry.Steps; none without an eval section): the tasks Build
// makes, the generate task the generate stage's own when it samples the
// eval set (kind.Eval.Generate, in the score task's environment), as the
// loop's pipeline.EvalSteps.
func Steps(b kind.StepBuild) ([]pipeline.Step, error) {
	e := b.Eval
	if e == nil {
		return nil, nil
	}
	gen, score, err := Build(*e)
	if err != nil {
		return nil, fmt.Errorf("eval: %v", err)
	}
	if e.Generate != nil {
		if gen, err = e.Generate(score.Env); err != nil {
			return nil, fmt.Errorf("eval (sampled by stages.generate): %v", err)
		}
		gen.Env = score.Env
	}
	return pipeline.EvalSteps(e.Loop, gen, score), nil
}

// Build makes the eval section's tasks (Steps): the eval set
// sampled from a checkpoint of the opened policy and scored with the
// reward stage's program; on a model that computes it (policy.ExactScorer,
// the embedded model) also the exact pass@1, unless the generate stage
// samples the eval set (episodes).
func Build(e kind.Eval) (generate, score *pipeline.Task, err error) {
	var o TaskOptions
	if e.Policy != nil {
		// The loader the generate stage uses too: a server holds at most
		// policy.KeepAdapters of the run's adapters, read from the shared
		// directory when the backend has one.
		o = TaskOptions{Policy: e.Policy.Policy, Identity: e.Policy.Identity, Adapters: e.Policy.Adapters()}
		if x, ok := e.Policy.Model.(policy.ExactScorer); ok && !e.StageGenerates() {
			o.Exact = x.ExactPass
		}
	}
	if e.Policy == nil && !e.StageGenerates() {
		return nil, nil, errors.New("evaluation samples from the policy section, which is missing")
	}
	o.Sampling, o.Seed, o.Set, o.Ks, o.Metrics = e.Sampling, e.Seed, e.Set, e.Ks, e.Metrics
	if e.Scorer != nil {
		o.Reward = e.Scorer
	}
	t, err := NewTasks(o)
	if err != nil {
		return nil, nil, err
	}
	return t.Generate, t.Score, nil
}
