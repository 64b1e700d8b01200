package config

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/policy"
)

// Plan is what a config asks of the engine: the run's options, the loop's
// shape and its stages. The caller adds what only it knows (a logger, an
// event display, --no-cache) before pipeline.Open.
type Plan struct {
	Run    pipeline.RunOptions
	Loop   pipeline.LoopConfig
	Stages pipeline.Stages
	// Policy is the policy a rollout stage samples from (nil without
	// one); Close releases it.
	Policy *policy.Opened
}

// Close stops what the plan started: the loopback server of an embedded
// model served over HTTP.
func (p *Plan) Close() error { return p.Policy.Close() }

// Plan builds the engine's inputs from a valid config. RunOptions.Name is
// the config's run name (override it for --run); ConfigHash is Hash().
// The policy section is opened (the key of an openai policy is read from
// the variable key_env names) and checked for what the loop will need of
// it (an ErrCapability otherwise); the reward stage's reward is compiled
// once (kind.Scoring) for its task and evaluation; and each stage's kind
// builds its task. Call Plan.Close when done.
func (c *Config) Plan() (Plan, error) {
	hash, err := c.Hash()
	if err != nil {
		return Plan{}, err
	}
	var p Plan
	p.Run = pipeline.RunOptions{Name: c.Run, Seed: c.Seed, ConfigHash: hash, Envs: map[string]pipeline.Settings{}}
	for name, s := range c.Environments {
		p.Run.Envs[name] = s
	}
	if m := c.Machine; m != nil {
		p.Run.Machine = &pipeline.Machine{CPU: m.CPU, MemoryMB: m.MemoryMB, GPU: m.GPU, GPUType: m.GPUType}
		this := pipeline.ThisMachine()
		if p.Run.Machine.CPU == 0 {
			p.Run.Machine.CPU = this.CPU
		}
		if p.Run.Machine.MemoryMB == 0 {
			p.Run.Machine.MemoryMB = this.MemoryMB
		}
	}
	ref, path, err := artifacts.SplitArtifact(c.Dataset)
	if err != nil {
		return Plan{}, fmt.Errorf("%w: dataset: %v", pipeline.ErrConfig, err)
	}
	p.Loop = pipeline.LoopConfig{Iterations: c.Iterations, BatchSize: c.BatchSize, MaxStaleness: c.Overlap.MaxStaleness,
		Dataset: pipeline.StoreArtifact(ref, path)}
	if c.InitialPolicy != "" {
		ref, path, err := artifacts.SplitArtifact(c.InitialPolicy)
		if err != nil {
			return Plan{}, fmt.Errorf("%w: initial_policy: %v", pipeline.ErrConfig, err)
		}
		a := pipeline.StoreDir(ref, strings.TrimSuffix(path, "/"))
		p.Loop.InitialPolicy = &a
	}

	if c.Policy != nil {
		spec := policy.Spec{Kind: c.Policy.Kind, Model: c.Policy.Model, Options: c.Policy.Options, Dir: filepath.Dir(c.file)}
		if p.Policy, err = c.reg.Policies.Open(context.Background(), spec); err != nil {
			return Plan{}, fmt.Errorf("%w: policy: %v", pipeline.ErrConfig, err)
		}
	}
	// What the loop will need of the opened plug-ins is checked before
	// any task is built, so that a run that cannot finish never starts.
	if err := c.needs(&p); err != nil {
		p.Close()
		return Plan{}, err
	}
	build := func(slot string) kind.Build {
		s := c.Stages.all()[slot]
		return kind.Build{Slot: slot, Env: s.Env, Version: s.Version, File: c.facts(), Policy: p.Policy}
	}
	// The reward stage's reward is compiled once, here, and handed to its
	// task and to the eval stage.
	var scorer kind.Scorer
	if sc, ok := c.Stages.Reward.Options.(kind.Scoring); ok {
		if scorer, err = sc.Compile(build(pipeline.SlotReward)); err != nil {
			p.Close()
			return Plan{}, stageError(pipeline.SlotReward, err)
		}
	}
	// The config's check wants a Scoring reward stage for eval; one whose
	// reward compiled to nothing is refused before any task is built.
	if c.Eval != nil && scorer == nil {
		p.Close()
		return Plan{}, c.capabilityError("stages.reward.kind", "", "eval: the reward stage's kind %s compiled no reward to score the eval set with",
			c.Stages.Reward.Kind)
	}
	tasks := map[string]*pipeline.Task{}
	for _, slot := range pipeline.SlotNames() {
		s := c.Stages.all()[slot]
		b := build(slot)
		if slot == pipeline.SlotReward {
			b.Scorer = scorer
		}
		t, err := s.Options.Task(b)
		if err != nil {
			p.Close()
			return Plan{}, stageError(slot, err)
		}
		t.Env = s.Env
		if s.Settings != nil {
			t.Settings = *s.Settings
		}
		tasks[slot] = t
	}
	p.Stages = pipeline.Stages{Sample: tasks[pipeline.SlotSample], Generate: tasks[pipeline.SlotGenerate],
		Reward: tasks[pipeline.SlotReward], Train: tasks[pipeline.SlotTrain]}
	// A train stage that trains on advantages has them computed once per
	// iteration, by their own task, between reward and train.
	if a, ok := c.Stages.all()[pipeline.SlotTrain].Options.(kind.Advantaged); ok {
		o := a.Advantages()
		if c.Advantages != nil && c.Advantages.Estimator != "" {
			// Checked when the file was read: the name is registered.
			if o.Estimator, err = c.reg.Estimators.Lookup(c.Advantages.Estimator); err != nil {
				p.Close()
				return Plan{}, fmt.Errorf("%w: advantages.estimator: %v", pipeline.ErrConfig, err)
			}
		}
		p.Stages.Advantages = advantages.TrainTask(o)
		p.Stages.Train = kind.OnAdvantages(p.Stages.Train)
		p.defaultEnv(p.Stages.Advantages.Env)
	}
	if c.Eval != nil {
		if err := c.planEval(&p, scorer); err != nil {
			p.Close()
			return Plan{}, err
		}
	}
	// Every iteration records its training health (docs/REPORTS.md).
	if c.reg.Health != nil {
		p.Stages.Health = c.reg.Health()
		p.defaultEnv(p.Stages.Health.Env)
	}
	return p, nil
}

// stageError is a stage's Compile or Task error as a config error that
// names the stage, and the key when the kind said which (kind.At).
func stageError(slot string, err error) error {
	var ke *kind.KeyError
	if errors.As(err, &ke) {
		return fmt.Errorf("%w: stages.%s.%s: %v", pipeline.ErrConfig, slot, ke.Key, ke.Err)
	}
	return fmt.Errorf("%w: stages.%s: %v", pipeline.ErrConfig, slot, err)
}

// defaultEnv defines the environment a built-in step runs in (advantages,
// health, eval) with the engine's defaults, unless the file defines it.
func (p *Plan) defaultEnv(name string) {
	if _, ok := p.Run.Envs[name]; !ok {
		p.Run.Envs[name] = pipeline.Settings{}
	}
}

// facts is what the stages may know of the rest of the file.
func (c *Config) facts() kind.File {
	f := kind.File{Dir: filepath.Dir(c.file), InitialPolicy: c.InitialPolicy != ""}
	if c.Policy != nil {
		f.Policy, f.PolicyModel = c.Policy.Kind, c.Policy.Model
	}
	return f
}

// planEval adds the evaluation stage: the eval set sampled from each
// checkpoint and scored with the reward stage's program.
func (c *Config) planEval(p *Plan, scorer kind.Scorer) error {
	e := c.Eval
	ref, path, err := artifacts.SplitArtifact(e.Set)
	if err != nil {
		return fmt.Errorf("%w: eval.set: %v", pipeline.ErrConfig, err)
	}
	if c.reg.Eval == nil {
		return fmt.Errorf("%w: eval: this program cannot evaluate (no eval builder is registered)", pipeline.ErrConfig)
	}
	s := policy.Sampling{N: e.N, Temperature: 1, MaxTokens: e.MaxTokens, Logprobs: true}
	if e.Temperature != nil {
		s.Temperature = *e.Temperature
	}
	ke := kind.Eval{Policy: p.Policy, Sampling: s, Seed: e.Seed, Set: e.Name, Ks: e.K, Metrics: c.reg.Metrics, Scorer: scorer}
	// A generate stage that samples the eval set its own way (episodes)
	// makes the generate task, in the eval environment.
	g := c.Stages.all()[pipeline.SlotGenerate]
	var eg kind.EvalGenerator
	if g != nil {
		eg, _ = g.Options.(kind.EvalGenerator)
	}
	stageGenerates := eg != nil
	ke.StageGenerates = stageGenerates
	gen, score, err := c.reg.Eval(ke)
	if err != nil {
		return fmt.Errorf("%w: eval: %v", pipeline.ErrConfig, err)
	}
	if stageGenerates {
		if gen, err = eg.EvalGenerate(ke, kind.Build{Slot: pipeline.SlotGenerate, Env: score.Env, Version: g.Version, File: c.facts(), Policy: p.Policy}); err != nil {
			return fmt.Errorf("%w: eval (sampled by stages.generate): %v", pipeline.ErrConfig, err)
		}
		gen.Env = score.Env
	}
	p.defaultEnv(score.Env)
	p.Stages.EvalGenerate, p.Stages.Eval = gen, score
	p.Loop.Eval = pipeline.EvalConfig{Every: e.Every, Set: pipeline.StoreArtifact(ref, path), Name: e.Name}
	return nil
}
