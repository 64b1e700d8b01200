package external

import (
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
	if l, ok := s.Hyperparameters[Loss]; ok && l != grpo.PPOClip.Name() {
		c.Fail("hyperparameters."+Loss, "remove hyperparameters.loss, or train with kind: grpo, the embedded trainer, whose trainer.loss takes "+strings.Join(c.File().Losses.Names(), " or "),
			"%s: %v: the external trainer supports ppo_clip only", c.Path("hyperparameters."+Loss), l)
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
	// Loss is the policy loss; the reference script has ppo_clip only, so
	// any other value is refused when the run is planned.
	Loss = "loss"
)

// Steps are the advantages step (advantages.Step) with the options of
// the advantages the trainer trains on, from the hyperparameters no_std
// and keep_zero_std: the loop computes them in their own step, between
// reward and train. A hyperparameter that is not a bool fails Task, so
// it is read as false here.
func (s *Stage) Steps(b kind.Build) ([]pipeline.Step, error) {
	a, _ := Options{Hyperparameters: s.Hyperparameters}.Advantages()
	a.Estimator, a.SampleStd = b.Estimator, b.SampleStd
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
