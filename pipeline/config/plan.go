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
// The policy section is opened under ctx (the key of an openai policy is
// read from the variable key_env names; a backend may dial its server)
// and checked for what the loop will need of it (an ErrCapability
// otherwise); the reward stage's reward is compiled once (kind.Scoring)
// for its task and evaluation; each stage's kind builds its task and the
// steps it adds (kind.Stepped), then the registry's step sources add
// theirs (health, evaluation); and the steps are checked to fit together
// (pipeline.CheckSteps). Every check fails before any task runs. Call
// Plan.Close when done.
func (c *Config) Plan(ctx context.Context) (Plan, error) {
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
		Dataset: pipeline.StoreArtifact(ref, path), MaxGenBatches: c.FilterGroups.maxGenBatches()}
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
		if p.Policy, err = c.reg.Policies.Open(ctx, spec); err != nil {
			return Plan{}, fmt.Errorf("%w: policy: %v", pipeline.ErrConfig, err)
		}
	}
	// What the loop will need of the opened plug-ins is checked before
	// any task is built, so that a run that cannot finish never starts.
	if err := c.needs(&p); err != nil {
		p.Close()
		return Plan{}, err
	}
	// The advantages section's estimator (checked when the file was read:
	// the name is registered); nil is the default, GRPO.
	var estimator advantages.Estimator
	if c.Advantages != nil && c.Advantages.Estimator != "" {
		if estimator, err = c.reg.Estimators.Lookup(c.Advantages.Estimator); err != nil {
			p.Close()
			return Plan{}, fmt.Errorf("%w: advantages.estimator: %v", pipeline.ErrConfig, err)
		}
	}
	gamma, lambda := c.Advantages.gammaLambda()
	build := func(slot string) kind.Build {
		s := c.Stages.all()[slot]
		return kind.Build{Slot: slot, Env: s.Env, Version: s.Version, File: c.facts(), Policy: p.Policy, Estimator: estimator,
			SampleStd: c.Advantages.sampleStd(), Gamma: gamma, Lambda: lambda, MaskTruncated: c.Advantages.maskTruncated()}
	}
	// The reward stage's reward is compiled once, here, and handed to its
	// task and to the eval stage.
	var scorer kind.Scorer
	if sc, ok := c.Stages.Reward.Options.(kind.Scoring); ok {
		if scorer, err = sc.Compile(build(pipeline.SlotReward)); err != nil {
			p.Close()
			return Plan{}, c.stageError(pipeline.SlotReward, err)
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
			return Plan{}, c.stageError(slot, err)
		}
		t.Env = s.Env
		if s.Settings != nil {
			t.Settings = *s.Settings
		}
		tasks[slot] = t
	}
	// The stages' kinds add their steps (the advantages a trainer trains
	// on), then the registry's sources (health, evaluation).
	var steps []pipeline.Step
	for _, slot := range pipeline.SlotNames() {
		if sk, ok := c.Stages.all()[slot].Options.(kind.Stepped); ok {
			more, err := sk.Steps(build(slot))
			if err != nil {
				p.Close()
				return Plan{}, c.stageError(slot, err)
			}
			steps = append(steps, more...)
		}
	}
	sb, err := c.stepBuild(&p, scorer)
	if err != nil {
		p.Close()
		return Plan{}, err
	}
	for _, src := range c.reg.Steps {
		more, err := src(sb)
		if err != nil {
			p.Close()
			return Plan{}, fmt.Errorf("%w: %v", pipeline.ErrConfig, err)
		}
		steps = append(steps, more...)
	}
	if _, _, _, ok := pipeline.EvalTasks(steps); c.Eval != nil && !ok {
		p.Close()
		return Plan{}, fmt.Errorf("%w: eval: this program cannot evaluate (no step source of its registry adds the eval steps)", pipeline.ErrConfig)
	}
	// A slot's task leaves the files of the steps that feed it to them
	// (the train task, advantages.parquet).
	for _, slot := range pipeline.SlotNames() {
		tasks[slot] = pipeline.Feeding(tasks[slot], slot, steps)
	}
	p.Stages = pipeline.Stages{Sample: tasks[pipeline.SlotSample], Generate: tasks[pipeline.SlotGenerate],
		Reward: tasks[pipeline.SlotReward], Train: tasks[pipeline.SlotTrain], Steps: steps, FilterGroups: c.filterGroupsTask()}
	if err := pipeline.CheckSteps(p.Stages); err != nil {
		p.Close()
		return Plan{}, err
	}
	// A step runs in its environment with the engine's defaults unless
	// the file defines it (docs/CONFIG.md, environments).
	for _, s := range steps {
		p.defaultEnv(s.Task.Env)
	}
	if t := p.Stages.FilterGroups; t != nil {
		p.defaultEnv(t.Env)
	}
	return p, nil
}

// stageError is a stage's Compile or Task error as a config error at the
// stage's key in the file, or at the key the kind named (kind.At): a
// missing reward spec is reported at the line of spec: that names it.
func (c *Config) stageError(slot string, err error) error {
	path := "stages." + slot
	var ke *kind.KeyError
	if errors.As(err, &ke) {
		path, err = path+"."+ke.Key, ke.Err
	}
	return c.errorAt(path, "", nil, "%s: %v", path, err)
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
	f := kind.File{Dir: filepath.Dir(c.file), InitialPolicy: c.InitialPolicy != "", MaxStaleness: c.Overlap.MaxStaleness, Losses: c.reg.Losses}
	if c.Policy != nil {
		f.Policy, f.PolicyModel = c.Policy.Kind, c.Policy.Model
	}
	if c.Advantages != nil && c.Advantages.Estimator != "" {
		f.Estimator, _ = c.reg.Estimators.Lookup(c.Advantages.Estimator)
	}
	return f
}

// stepBuild is what the registry's step sources build from: the opened
// policy, and the eval section with the reward stage's compiled scorer
// (and the generate stage's own eval task when it samples the eval set).
func (c *Config) stepBuild(p *Plan, scorer kind.Scorer) (kind.StepBuild, error) {
	sb := kind.StepBuild{Policy: p.Policy}
	e := c.Eval
	if e == nil {
		return sb, nil
	}
	ref, path, err := artifacts.SplitArtifact(e.Set)
	if err != nil {
		return sb, fmt.Errorf("%w: eval.set: %v", pipeline.ErrConfig, err)
	}
	s := policy.Sampling{N: e.N, Temperature: 1, MaxTokens: e.MaxTokens, Logprobs: true}
	if e.Temperature != nil {
		s.Temperature = *e.Temperature
	}
	ke := &kind.Eval{Policy: p.Policy, Sampling: s, Seed: e.Seed, Set: e.Name, Ks: e.K, Metrics: c.reg.Metrics, Scorer: scorer,
		Loop: pipeline.EvalConfig{Every: e.Every, Set: pipeline.StoreArtifact(ref, path), Name: e.Name}}
	// A generate stage that samples the eval set its own way (episodes)
	// makes the generate task, in the eval environment.
	if g := c.Stages.all()[pipeline.SlotGenerate]; g != nil {
		if eg, ok := g.Options.(kind.EvalGenerator); ok {
			ke.Generate = func(env string) (*pipeline.Task, error) {
				return eg.EvalGenerate(*ke, kind.Build{Slot: pipeline.SlotGenerate, Env: env, Version: g.Version, File: c.facts(), Policy: p.Policy})
			}
		}
	}
	sb.Eval = ke
	return sb, nil
}
