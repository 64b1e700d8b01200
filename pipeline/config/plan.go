package config

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/evaluators"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/reports"
	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/runners"
	"github.com/rlpipe/rlpipe/rollouts"
	"github.com/rlpipe/rlpipe/trainers/embedded"
	"github.com/rlpipe/rlpipe/trainers/external"
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
// A rollout stage opens its policy (the key of an openai policy is read
// from the variable key_env names); call Plan.Close when done.
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

	// The stand-ins share one Options value; each stage takes its knobs.
	o := standin.Options{Envs: map[string]string{}, FailTimes: map[string]int{}}
	for name, s := range c.Stages.all() {
		if s == nil || s.Kind != KindStandin {
			continue
		}
		o.Envs[name] = s.Env
		o.FailTimes[name] = s.FailTimes
		switch name {
		case pipeline.SlotSample:
			o.SampleSleep = s.Sleep
		case pipeline.SlotGenerate:
			o.GenerateSleep, o.SamplesPerPrompt = s.Sleep, s.SamplesPerPrompt
		case pipeline.SlotReward:
			o.RewardSleep, o.JudgeURL = s.Sleep, s.JudgeURL
		case pipeline.SlotTrain:
			o.TrainSleep = s.Sleep
		}
	}
	stand := standin.Stages(o)
	var specErr error
	if c.Policy != nil {
		spec, err := c.policySpec()
		if err != nil {
			return Plan{}, err
		}
		if p.Policy, err = policy.Open(context.Background(), spec); err != nil {
			return Plan{}, fmt.Errorf("%w: policy: %v", pipeline.ErrConfig, err)
		}
	}
	var reward *rewards.Program // the cel reward stage's, for the eval stage too
	pick := func(name string, standinTask *pipeline.Task) *pipeline.Task {
		s := c.Stages.all()[name]
		var t *pipeline.Task
		switch s.Kind {
		case KindStandin:
			t = standinTask
			if s.Version != "" {
				t.Version += "+" + s.Version
			}
		case KindCEL:
			path := s.Spec
			if !filepath.IsAbs(path) {
				path = filepath.Join(filepath.Dir(c.file), path)
			}
			spec, err := rewards.LoadSpec(path)
			if err == nil {
				reward, err = runners.Compile(spec)
			}
			if err != nil {
				specErr = fmt.Errorf("%w: stages.%s.spec: %v", pipeline.ErrConfig, name, err)
				return standinTask
			}
			t = rewards.Task(reward)
			t.Env = s.Env
		case KindRollout:
			var err error
			t, err = c.rolloutTask(s, p.Policy)
			if err != nil {
				specErr = err
				return standinTask
			}
		case KindDataset:
			t = rollouts.SampleTask()
			t.Env = s.Env
			if s.Version != "" {
				t.Version += "+" + s.Version
			}
		case KindExternal:
			env := map[string]string{}
			for k, v := range s.Environment {
				env[k] = v
			}
			var err error
			t, err = external.Task(external.Options{Command: s.Command, Hyperparameters: s.Hyperparameters, Env: env,
				Dir: filepath.Dir(c.file), Version: s.Version})
			if err != nil {
				specErr = fmt.Errorf("%w: stages.train: %v", pipeline.ErrConfig, err)
				return standinTask
			}
			t.Env = s.Env
		case KindGRPO:
			var err error
			t, err = c.grpoTask(p.Policy)
			if err != nil {
				specErr = err
				return standinTask
			}
			t.Env = s.Env
			if s.Version != "" {
				t.Version += "+" + s.Version
			}
		default:
			t = commandTask(name, s)
		}
		if s.Settings != nil {
			t.Settings = *s.Settings
		}
		return t
	}
	p.Stages = pipeline.Stages{
		Sample:   pick(pipeline.SlotSample, stand.Sample),
		Generate: pick(pipeline.SlotGenerate, stand.Generate),
		Reward:   pick(pipeline.SlotReward, stand.Reward),
		Train:    pick(pipeline.SlotTrain, stand.Train),
	}
	if specErr == nil && c.Eval != nil {
		specErr = c.planEval(&p, reward)
	}
	// Every iteration records its training health (docs/REPORTS.md).
	p.Stages.Health = reports.HealthTask()
	if _, ok := p.Run.Envs[p.Stages.Health.Env]; !ok {
		p.Run.Envs[p.Stages.Health.Env] = pipeline.Settings{}
	}
	if specErr != nil {
		p.Close()
		return Plan{}, specErr
	}
	return p, nil
}

// grpoTask is the embedded GRPO trainer with the trainer section's
// hyperparameters.
func (c *Config) grpoTask(opened *policy.Opened) (*pipeline.Task, error) {
	var m *tiny.Model
	if opened != nil {
		m, _ = opened.Model.(*tiny.Model)
	}
	if m == nil {
		return nil, fmt.Errorf("%w: stages.train: the grpo stage trains the embedded model; set policy: {kind: embedded}", pipeline.ErrConfig)
	}
	var o embedded.Options
	if c.Trainer != nil {
		b, err := json.Marshal(c.Trainer)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return nil, fmt.Errorf("%w: trainer: %v", pipeline.ErrConfig, err)
		}
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("%w: trainer: %v", pipeline.ErrConfig, err)
	}
	return embedded.Task(m, o), nil
}

// planEval adds the evaluation stage: the eval set sampled from each
// checkpoint and scored with the reward stage's program.
func (c *Config) planEval(p *Plan, prog *rewards.Program) error {
	e := c.Eval
	ref, path, err := artifacts.SplitArtifact(e.Set)
	if err != nil {
		return fmt.Errorf("%w: eval.set: %v", pipeline.ErrConfig, err)
	}
	s := policy.Sampling{N: e.N, Temperature: 1, MaxTokens: e.MaxTokens, Logprobs: true}
	if e.Temperature != nil {
		s.Temperature = *e.Temperature
	}
	o := evaluators.TaskOptions{Policy: p.Policy.Policy, Identity: p.Policy.Identity, Sampling: s, Seed: e.Seed,
		Reward: prog, Set: e.Name, Ks: e.K}
	if c.Policy != nil && c.Policy.AdapterRoot != "" {
		// A remote server reads checkpoints from the shared directory, as
		// the rollout stage's adapters.
		o.Adapters = policy.NewAdapters(p.Policy.Policy, p.Policy.Identity, c.Policy.AdapterRoot, 2)
	}
	if m, ok := p.Policy.Model.(*tiny.Model); ok {
		o.Exact = tiny.ExactPass(m)
	}
	t, err := evaluators.NewTasks(o)
	if err != nil {
		return fmt.Errorf("%w: eval: %v", pipeline.ErrConfig, err)
	}
	if _, ok := p.Run.Envs[t.Score.Env]; !ok {
		p.Run.Envs[t.Score.Env] = pipeline.Settings{}
	}
	p.Stages.EvalGenerate, p.Stages.Eval = t.Generate, t.Score
	p.Loop.Eval = pipeline.EvalConfig{Every: e.Every, Set: pipeline.StoreArtifact(ref, path), Name: e.Name}
	return nil
}

// policySpec is the policy section as policy.Open takes it.
func (c *Config) policySpec() (policy.Spec, error) {
	pc := c.Policy
	s := policy.Spec{Kind: pc.Kind, Model: pc.Model, Serve: pc.Serve, Endpoints: pc.Endpoints,
		Concurrency: pc.Concurrency, Timeout: pc.Timeout, Retries: pc.Retries}
	if pc.Kind == PolicyEmbedded && strings.HasSuffix(pc.Model, ".safetensors") && !filepath.IsAbs(pc.Model) {
		s.Model = filepath.Join(filepath.Dir(c.file), pc.Model)
	}
	if pc.KeyEnv != "" {
		s.APIKey = os.Getenv(pc.KeyEnv)
		if s.APIKey == "" {
			return s, fmt.Errorf("%w: policy.key_env: the variable %s is empty or unset; export it before the run", pipeline.ErrConfig, pc.KeyEnv)
		}
	}
	return s, nil
}

// rolloutTask is the generate stage sampling from the opened policy.
func (c *Config) rolloutTask(s *Stage, opened *policy.Opened) (*pipeline.Task, error) {
	sp := policy.Sampling{N: s.Sampling.N, Temperature: 1, TopP: s.Sampling.TopP, MaxTokens: s.Sampling.MaxTokens,
		Stop: s.Sampling.Stop, Logprobs: true}
	if s.Sampling.Temperature != nil {
		sp.Temperature = *s.Sampling.Temperature
	}
	o := rollouts.Options{Policy: opened.Policy, Identity: opened.Identity, Sampling: sp, Batch: s.Batch, Env: s.Env}
	if c.Policy.AdapterRoot != "" {
		o.AdapterRoot = c.Policy.AdapterRoot
	}
	t, err := rollouts.Task(o)
	if err != nil {
		return nil, fmt.Errorf("%w: stages.generate: %v", pipeline.ErrConfig, err)
	}
	if s.Version != "" {
		t.Version += "+" + s.Version
	}
	return t, nil
}

// commandTask builds the task of a command stage. The engine's cache key
// does not see the argv, so the task's version is a digest of everything
// that shapes the command's results: its version, argv, outputs and
// environment (secret values redacted, so rotating a key keeps the cache).
func commandTask(name string, s *Stage) *pipeline.Task {
	t := &pipeline.Task{Name: name, Env: s.Env, IgnoreInputs: s.IgnoreInputs}
	env := map[string]string{}
	for k, v := range s.Environment {
		if IsSecret(k) {
			v = Redacted
		}
		env[k] = v
	}
	b, _ := json.Marshal(struct {
		Version     string            `json:"version"`
		Command     []string          `json:"command"`
		Outputs     []Output          `json:"outputs"`
		Environment map[string]string `json:"environment"`
	}{s.Version, s.Command, s.Outputs, env})
	sum := sha256.Sum256(b)
	t.Version = "command-" + hex.EncodeToString(sum[:8])

	argv := s.Command
	if len(s.Environment) > 0 {
		// env(1) sets the variables and execs the command, so they never
		// sit in a process listing longer than that exec.
		keys := make([]string, 0, len(s.Environment))
		for k := range s.Environment {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		argv = []string{"env"}
		for _, k := range keys {
			argv = append(argv, k+"="+s.Environment[k])
		}
		argv = append(argv, s.Command...)
	}
	t.Command = argv
	for _, o := range s.Outputs {
		out := pipeline.Output{Name: o.Name, File: o.File, Dir: o.Dir}
		if !o.Dir {
			out.Check = tableCheck(o.Name)
		}
		t.Outputs = append(t.Outputs, out)
	}
	return t
}

// tableCheck validates the tables the loop passes between stages.
func tableCheck(output string) func(string) error {
	switch output {
	case pipeline.OutPrompts:
		return checkTable(tables.Prompts)
	case pipeline.OutTrajectories:
		return checkTable(tables.Trajectories)
	case pipeline.OutRewards:
		return checkTable(tables.Rewards)
	}
	return nil
}

func checkTable[T any](t *tables.Table[T]) func(string) error {
	return func(path string) error { return tables.CheckFile(path, t) }
}
