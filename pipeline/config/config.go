package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"

	"github.com/rlpipe/rlpipe/pipeline"
)

// Config is a parsed pipeline.yaml. Zero fields mean "not set": defaults
// are applied by Parse (top level) and by the engine (environments).
type Config struct {
	// Run is the default run name (the command line may override it).
	Run string `yaml:"run,omitempty"`
	// Store is the store URI; a relative path is taken from the config
	// file's directory. The command line and RLPIPE_STORE override it.
	Store string `yaml:"store,omitempty"`
	// Seed makes task seeds deterministic.
	Seed uint64 `yaml:"seed"`
	// Iterations is the last iteration to run, counting from 1.
	Iterations int `yaml:"iterations"`
	// BatchSize is how many prompts each iteration consumes.
	BatchSize int `yaml:"batch_size"`
	// Dataset is the prompts table, REF:PATH.
	Dataset string `yaml:"dataset"`
	// InitialPolicy is an adapter directory REF:PATH to start from; empty
	// means the base model.
	InitialPolicy string  `yaml:"initial_policy,omitempty"`
	Overlap       Overlap `yaml:"overlap"`
	// Policy is the model a rollout stage samples from.
	Policy *Policy `yaml:"policy,omitempty"`
	// Trainer holds the hyperparameters of a grpo train stage.
	Trainer *Trainer `yaml:"trainer,omitempty"`
	// Eval evaluates checkpoints on a held-out set during the run.
	Eval *Eval `yaml:"eval,omitempty"`
	// Machine is what the local executor hands out; nil means this
	// machine's cores and memory, no GPU.
	Machine *Machine `yaml:"machine,omitempty"`
	// Environments are the task environments by name.
	Environments map[string]pipeline.Settings `yaml:"environments"`
	Stages       Stages                       `yaml:"stages"`

	file string              // name errors refer to
	pos  map[string]position // path ("stages.generate.env") → where its key is
}

// Overlap bounds how far generation may run ahead of training.
type Overlap struct {
	// MaxStaleness is how many policy updates a sample may lag: 0 is
	// on-policy and sequential.
	MaxStaleness int `yaml:"max_staleness"`
}

// Policy kinds.
const (
	PolicyEmbedded = "embedded" // the built-in tiny model (policy/tiny)
	PolicyOpenAI   = "openai"   // a server speaking the OpenAI API: vLLM, SGLang, llama.cpp
)

// Policy ways of serving the embedded model.
const (
	ServeInProcess = "inprocess" // call the model directly
	ServeHTTP      = "http"      // serve it on 127.0.0.1 for the run and sample over HTTP
)

// Policy says what generates text for a rollout stage.
type Policy struct {
	// Kind is embedded or openai.
	Kind string `yaml:"kind"`
	// Model: for embedded, "tiny-arith" (the shipped weights) or a
	// safetensors file relative to the pipeline file; for openai, the
	// served base model's name.
	Model string `yaml:"model,omitempty"`
	// Serve (embedded only) is inprocess (default) or http.
	Serve string `yaml:"serve,omitempty"`
	// Endpoints (openai only) are the servers' base URLs, balanced.
	Endpoints []string `yaml:"endpoints,omitempty"`
	// KeyEnv (openai only) names the environment variable that holds the
	// API key; the key itself never enters the config.
	KeyEnv string `yaml:"key_env,omitempty"`
	// AdapterRoot (openai only) is a directory the servers can read
	// adapters from (a shared mount); empty loads them from this
	// machine's scratch copy.
	AdapterRoot string `yaml:"adapter_root,omitempty"`
	// Concurrency bounds requests in flight per endpoint (openai).
	Concurrency int `yaml:"concurrency,omitempty"`
	// Timeout bounds one HTTP attempt (openai).
	Timeout time.Duration `yaml:"timeout,omitempty"`
	// Retries is how many times a failing request is retried (openai).
	Retries int `yaml:"retries,omitempty"`
}

// Trainer holds the embedded GRPO trainer's hyperparameters
// (trainers/embedded.Options); zero fields take its defaults.
type Trainer struct {
	LR          float64      `yaml:"lr,omitempty" json:"lr"`
	WeightDecay float64      `yaml:"weight_decay,omitempty" json:"weight_decay"`
	ClipNorm    float64      `yaml:"clip_norm,omitempty" json:"clip_norm"`
	Epochs      int          `yaml:"epochs,omitempty" json:"epochs"`
	Minibatches int          `yaml:"minibatches,omitempty" json:"minibatches"`
	EpsLow      float64      `yaml:"eps_low,omitempty" json:"eps_low"`
	EpsHigh     float64      `yaml:"eps_high,omitempty" json:"eps_high"`
	Beta        float64      `yaml:"beta,omitempty" json:"beta"`
	Aggregation string       `yaml:"aggregation,omitempty" json:"aggregation"`
	NoStd       bool         `yaml:"no_std,omitempty" json:"no_std"`
	KeepZeroStd bool         `yaml:"keep_zero_std,omitempty" json:"keep_zero_std"`
	LoRA        *TrainerLoRA `yaml:"lora,omitempty" json:"lora,omitempty"`
	Shards      int          `yaml:"shards,omitempty" json:"shards"`
}

// TrainerLoRA shapes the adapter the first iteration creates.
type TrainerLoRA struct {
	Rank    int      `yaml:"rank,omitempty" json:"rank"`
	Alpha   float64  `yaml:"alpha,omitempty" json:"alpha"`
	Targets []string `yaml:"targets,omitempty" json:"targets,omitempty"`
	Seed    uint64   `yaml:"seed,omitempty" json:"seed"`
}

// Eval says how checkpoints are evaluated during the run.
type Eval struct {
	// Set is the eval set, a prompts table REF:PATH, disjoint from the
	// training prompts.
	Set string `yaml:"set"`
	// Name names the set in paths and tables (default "heldout").
	Name string `yaml:"name,omitempty"`
	// Every evaluates every Every-th checkpoint (and the last, and the
	// starting policy).
	Every int `yaml:"every"`
	// N samples per problem; K the k of pass@k and the other metrics
	// (default [1, N]).
	N           int      `yaml:"n"`
	K           []int    `yaml:"k,omitempty"`
	Temperature *float64 `yaml:"temperature,omitempty"`
	MaxTokens   int      `yaml:"max_tokens"`
	// Seed seeds every problem's samples, the same for every checkpoint.
	Seed int64 `yaml:"seed,omitempty"`
}

// Sampling are a rollout stage's sampling parameters.
type Sampling struct {
	// N is the number of samples per prompt (the group size G).
	N           int      `yaml:"n"`
	Temperature *float64 `yaml:"temperature,omitempty"`
	TopP        float64  `yaml:"top_p,omitempty"`
	MaxTokens   int      `yaml:"max_tokens"`
	Stop        []string `yaml:"stop,omitempty"`
}

// Machine is the capacity the local executor hands out.
type Machine struct {
	CPU      float64 `yaml:"cpu"`
	MemoryMB int     `yaml:"memory_mb"`
	GPU      int     `yaml:"gpu"`
	GPUType  string  `yaml:"gpu_type"`
}

// Stages are the four stages of an iteration.
type Stages struct {
	Sample   *Stage `yaml:"sample"`
	Generate *Stage `yaml:"generate"`
	Reward   *Stage `yaml:"reward"`
	Train    *Stage `yaml:"train"`
}

// Stage kinds.
const (
	KindStandin  = "standin"  // a built-in stand-in stage (pipeline/standin)
	KindCommand  = "command"  // an external command
	KindCEL      = "cel"      // the reward stage: a reward spec of CEL components (docs/REWARDS.md)
	KindRollout  = "rollout"  // the generate stage: sample from the config's policy (docs/PIPELINE.md)
	KindGRPO     = "grpo"     // the train stage: GRPO on a LoRA adapter of the embedded model
	KindDataset  = "dataset"  // the sample stage: the next batch_size prompts of the dataset, exactly once
	KindExternal = "external" // the train stage: an external trainer behind the file contract (docs/TRAINERS.md)
)

// Stage configures one stage of the loop.
type Stage struct {
	// Kind is standin, command, (sample only) dataset, (reward only) cel,
	// (generate only) rollout or (train only) grpo or external.
	Kind string `yaml:"kind"`
	// Env names the task environment (default: the stage's name).
	Env string `yaml:"env,omitempty"`
	// Version enters the cache key: bump it when the stage's code changes
	// meaning.
	Version string `yaml:"version,omitempty"`
	// Settings override the environment's for this stage.
	Settings *pipeline.Settings `yaml:"settings,omitempty"`

	// Stand-in knobs.
	Sleep            time.Duration `yaml:"sleep,omitempty"`
	FailTimes        int           `yaml:"fail_times,omitempty"`
	SamplesPerPrompt int           `yaml:"samples_per_prompt,omitempty"` // generate only
	JudgeURL         string        `yaml:"judge_url,omitempty"`          // reward only

	// Spec is the reward spec file of a cel reward stage, relative to the
	// pipeline file.
	Spec string `yaml:"spec,omitempty"`

	// Sampling is a rollout stage's sampling; Batch the prompts per call.
	Sampling *Sampling `yaml:"sampling,omitempty"`
	Batch    int       `yaml:"batch,omitempty"`

	// Hyperparameters are an external trainer's, written as JSON for it.
	Hyperparameters map[string]any `yaml:"hyperparameters,omitempty"`

	// Command knobs (command and environment also for external trainers).
	Command      []string          `yaml:"command,omitempty"`
	Outputs      []Output          `yaml:"outputs,omitempty"`
	Environment  map[string]string `yaml:"environment,omitempty"`
	IgnoreInputs []string          `yaml:"ignore_inputs,omitempty"`
}

// Output declares a file (or directory) a command stage writes.
type Output struct {
	Name string `yaml:"name"`
	File string `yaml:"file,omitempty"`
	Dir  bool   `yaml:"dir,omitempty"`
}

// Load reads and parses a pipeline file.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read pipeline config: %w", err)
	}
	c, err := Parse(path, b)
	if err != nil {
		return nil, err
	}
	if c.Store != "" && isLocalPath(c.Store) && !filepath.IsAbs(c.Store) {
		c.Store = filepath.Join(filepath.Dir(path), c.Store)
	}
	return c, nil
}

// isLocalPath reports whether a store URI is a plain path (the embedded
// store) rather than scheme://...
func isLocalPath(uri string) bool {
	return !bytes.Contains([]byte(uri), []byte("://"))
}

// Parse parses and validates a pipeline config; name labels positions in
// errors ("pipeline.yaml:12:5: ..."). Every problem found is reported,
// each as an *Error, joined.
func Parse(name string, data []byte) (c *Config, err error) {
	// The YAML library is third-party code fed arbitrary bytes: a panic in
	// it must not take the process down.
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, &Error{File: name, Msg: fmt.Sprintf("cannot parse the file (%v)", r)}
		}
	}()
	d := &decoder{file: name, pos: map[string]position{}}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, d.yamlError(err)
	}
	var body = documentBody(f)
	if len(f.Docs) > 1 {
		return nil, &Error{File: name, Line: docLine(f.Docs[1]), Msg: "the file holds several YAML documents; a pipeline is one"}
	}
	if body == nil {
		return nil, &Error{File: name, Msg: "the file is empty; see the pipeline reference for the keys"}
	}
	d.walk(body, configType, "")
	if err := d.err(); err != nil {
		return nil, err
	}
	c = &Config{}
	if err := yaml.UnmarshalWithOptions(data, c, yaml.Strict()); err != nil {
		return nil, d.yamlError(err)
	}
	c.file, c.pos = name, d.pos
	c.applyDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// File is the name the config was parsed under.
func (c *Config) File() string { return c.file }

// applyDefaults fills in what an omitted key means.
func (c *Config) applyDefaults() {
	if c.Environments == nil {
		c.Environments = map[string]pipeline.Settings{}
	}
	for name, s := range c.Stages.all() {
		if s == nil {
			continue
		}
		if s.Env == "" {
			s.Env = name
			// A stage that names no environment runs in one named after
			// it, with the engine's defaults unless the file defines it.
			if _, ok := c.Environments[name]; !ok {
				c.Environments[name] = pipeline.Settings{}
			}
		}
	}
}

// all returns the stages by name, in loop order.
func (s *Stages) all() map[string]*Stage {
	return map[string]*Stage{pipeline.SlotSample: s.Sample, pipeline.SlotGenerate: s.Generate, pipeline.SlotReward: s.Reward, pipeline.SlotTrain: s.Train}
}
