package external

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// Kind is kind: external, the train stage that runs an external trainer
// behind the file contract (docs/TRAINERS.md).
var Kind = kind.Of[Stage]("external", pipeline.SlotTrain)

// Stage is an external train stage's keys.
type Stage struct {
	// Hyperparameters are written as JSON for the trainer.
	Hyperparameters map[string]any `yaml:"hyperparameters,omitempty"`
	// Command is the trainer's argv; the contract's flags are appended.
	Command []string `yaml:"command,omitempty"`
	// Environment is added to the trainer's environment.
	Environment map[string]string `yaml:"environment,omitempty"`
}

var _ kind.Stepped = (*Stage)(nil)

// Check checks the slot, the command and the variable names.
func (s *Stage) Check(c kind.Checker) {
	if !kind.OnlyIn(c, pipeline.SlotTrain, "can be an external trainer") {
		return
	}
	if len(s.Command) == 0 {
		c.Fail("", "e.g. command: [python3, trainers/python/grpo_train.py]", "%s: an external trainer needs command (its argv; the contract's flags are appended)", c.Path(""))
	}
	kind.CheckEnvironment(c, s.Environment)
	checkKLEntropy(c, s.Hyperparameters)
	checkLoss(c, s.Hyperparameters)
	checkAggregation(c, s.Hyperparameters[Aggregation])
	if key, msg := rolloutCorrection(s.Hyperparameters); key != "" {
		c.Fail("hyperparameters."+key, "", "%s: %s", c.Path("hyperparameters."+key), msg)
	}
	s.checkCritic(c)
	if f := c.File(); f.MaxStaleness > 0 && s.Hyperparameters[RecomputeOldLogprobs] == true && s.Hyperparameters[RescoreStale] != true {
		c.Fail("hyperparameters."+RecomputeOldLogprobs,
			"set overlap.max_staleness: 0 to recompute on-policy, remove recompute_old_logprobs to keep the sampler's logprobs, or set hyperparameters.rescore_stale: true to accept it, as docs/TRAINERS.md explains",
			"%s: with overlap.max_staleness %d the trainer would rescore samples of adapter N-%d with adapter N-1, anchoring the ratio on a policy that did not sample them: the staleness correction would silently disappear",
			c.Path("hyperparameters."+RecomputeOldLogprobs), f.MaxStaleness, f.MaxStaleness+1)
	}
}

// Hyperparameters of the reference script that rlpipe checks against the
// loop: recomputing the old logprobs with the trainer's adapter is only
// right on-policy, unless rescore_stale says the user wants it anyway.
const (
	RecomputeOldLogprobs = "recompute_old_logprobs"
	RescoreStale         = "rescore_stale"
	// Loss is the policy loss; the reference script computes the
	// embedded trainer's four (scriptLosses), so any other value is
	// refused when the run is planned, and so is DualClip with a loss
	// other than ppo_clip.
	Loss     = "loss"
	DualClip = "dual_clip"
	// Aggregation is how the per-token terms become the loss: the
	// reference script has the embedded trainer's three (and verl's names
	// of the first two), so any other value is refused when the run is
	// planned.
	Aggregation = "aggregation"
)

// scriptLosses are the policy losses the reference script computes, as
// trainers/grpo does (hyperparameters.loss).
var scriptLosses = []grpo.PolicyLoss{grpo.PPOClip, grpo.GSPO, grpo.CISPO, grpo.Reinforce}

// checkLoss fails the plan at hyperparameters.loss when it names no loss
// of scriptLosses, and at hyperparameters.dual_clip when a dual clip is
// set with another loss than ppo_clip (dual clip is PPO's).
func checkLoss(c kind.Checker, hp map[string]any) {
	l, ok := hp[Loss]
	if !ok {
		return
	}
	names := make([]string, len(scriptLosses))
	for i, x := range scriptLosses {
		names[i] = x.Name()
	}
	name, _ := l.(string)
	if !slices.Contains(names, name) {
		c.Fail("hyperparameters."+Loss, "use "+strings.Join(names, ", "),
			"%s: %v: the external trainer's reference script computes no such loss", c.Path("hyperparameters."+Loss), l)
		return
	}
	var d float64
	switch v := hp[DualClip].(type) {
	case int:
		d = float64(v)
	case int64:
		d = float64(v)
	case uint64:
		d = float64(v)
	case float64:
		d = v
	}
	if d != 0 && name != grpo.PPOClip.Name() {
		c.Fail("hyperparameters."+DualClip, "remove dual_clip or the loss",
			"%s: %v; dual clip applies to loss ppo_clip only, not %s", c.Path("hyperparameters."+DualClip), d, name)
	}
}

// checkAggregation fails the plan at hyperparameters.aggregation when it
// names no aggregation the reference script computes (grpo.Aggregations,
// or verl's token_mean and seq_mean_token_mean); absent is the default.
func checkAggregation(c kind.Checker, v any) {
	if v == nil {
		return
	}
	a, ok := v.(string)
	if ok && slices.Contains(grpo.Aggregations, grpo.Aggregation(a).Canonical()) {
		return
	}
	c.Fail("hyperparameters."+Aggregation, fmt.Sprintf("use %s, %s or %s; verl's token_mean and seq_mean_token_mean are the first two", grpo.Aggregations[0], grpo.Aggregations[1], grpo.Aggregations[2]),
		"%s: %v: the external trainer's reference script aggregates no such way", c.Path("hyperparameters."+Aggregation), v)
}

// Steps are the advantages step (advantages.Step) with the options of
// the advantages the trainer trains on, from the hyperparameters no_std
// and keep_zero_std: the loop computes them in their own step, between
// reward and train. A hyperparameter that is not a bool fails Task, so
// it is read as false here.
func (s *Stage) Steps(b kind.Build) ([]pipeline.Step, error) {
	a, _ := Options{Hyperparameters: s.Hyperparameters}.Advantages()
	a.Estimator, a.PopulationStd = b.Estimator, b.PopulationStd
	a.Gamma, a.Lambda = b.Gamma, b.Lambda
	a.MaskTruncated = b.MaskTruncated
	return []pipeline.Step{advantages.Step(a)}, nil
}

// Task is the external trainer; relative paths in the command resolve
// against the pipeline file's directory.
func (s *Stage) Task(b kind.Build) (*pipeline.Task, error) {
	env := map[string]string{}
	for k, v := range s.Environment {
		env[k] = v
	}
	o := Options{Command: s.Command, Hyperparameters: s.Hyperparameters, Env: env, Dir: b.File.Dir, Version: b.Version}
	if advantages.NeedsCritic(b.Estimator) {
		o.GAE = &GAE{Gamma: b.Gamma, Lambda: b.Lambda}
	}
	t, err := Task(o)
	if err != nil {
		return nil, err
	}
	t.Env = b.Env
	return t, nil
}
