package config

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/goccy/go-yaml/ast"

	"github.com/rlpipe/rlpipe/internal/yamlcore"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/trackers"
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
	// Advantages chooses how a train stage that trains on advantages gets
	// them (nil: GRPO's).
	Advantages *Advantages `yaml:"advantages,omitempty"`
	// FilterGroups turns on dynamic sampling (nil: off).
	FilterGroups *FilterGroups `yaml:"filter_groups,omitempty"`
	// Eval evaluates checkpoints on a held-out set during the run.
	Eval *Eval `yaml:"eval,omitempty"`
	// Tracking are the experiment trackers that receive the run's figures
	// as it commits them, several at once (TensorBoard, MLflow).
	Tracking []Tracker `yaml:"tracking,omitempty"`
	// Machine is what the local executor hands out; nil means this
	// machine's cores and memory, no GPU.
	Machine *Machine `yaml:"machine,omitempty"`
	// Environments are the task environments by name.
	Environments map[string]pipeline.Settings `yaml:"environments"`
	Stages       Stages                       `yaml:"stages"`

	file string              // name errors refer to
	pos  map[string]position // path ("stages.generate.env") → where its key is
	reg  *kind.Registry      // the kinds the stages name
	ovs  []override          // the command line's overrides, in order
}

// Overlap bounds how far generation may run ahead of training.
type Overlap struct {
	// MaxStaleness is how many policy updates a sample may lag: 0 is
	// on-policy and sequential.
	MaxStaleness int `yaml:"max_staleness"`
}

// Policy says what generates text for the stages that sample: a
// registered policy backend (kind.Registry's Policies) and its own options.
type Policy struct {
	// Kind names the backend: embedded (the built-in tiny model), openai
	// (a server of the OpenAI API: vLLM, SGLang, llama.cpp), ….
	Kind string `yaml:"kind"`
	// Model: for embedded, "tiny-arith" (the shipped weights) or a
	// safetensors file relative to the pipeline file; for openai, the
	// served base model's name.
	Model string `yaml:"model,omitempty"`
	// Options are the backend's other keys, decoded into the value its
	// Options method returns (*embedded.PolicyOptions, …); nil for an
	// unknown kind.
	Options any `yaml:"-"`
}

// Tracker is an entry of the tracking section: a registered tracker
// backend (kind.Registry's Trackers) and its own keys.
type Tracker struct {
	// Kind names the backend: tensorboard, mlflow, ….
	Kind string `yaml:"kind"`
	// Options are the backend's other keys, decoded into the value its
	// Options method returns (*trackers.TensorBoardOptions, …); nil for an
	// unknown kind.
	Options any `yaml:"-"`
}

// Spec is the tracker to open (trackers.Backends.Open).
func (t Tracker) Spec() trackers.Spec { return trackers.Spec{Kind: t.Kind, Options: t.Options} }

// Advantages is the advantages section.
type Advantages struct {
	// Estimator names a registered advantage estimator (kind.Registry's
	// Estimators); empty is grpo.
	Estimator string `yaml:"estimator,omitempty"`
	// Std is the standard deviation the groups are divided by: sample
	// (Bessel's correction, as TRL and verl; the default) or population
	// (the default before issue 36). Empty: the default, except that a
	// resumed run keeps the std of its committed iterations (pipeline/driver).
	Std string `yaml:"std,omitempty"`
	// MaskTruncatedCompletions masks the samples that stopped at the
	// length limit (finish reason length) from the loss: DAPO's overlong
	// filtering, under TRL's name.
	MaskTruncatedCompletions bool `yaml:"mask_truncated_completions,omitempty"`
	// Gamma and Lambda are GAE's discount and λ (estimator gae only;
	// default 1 and 1, verl's).
	Gamma  *float64 `yaml:"gamma,omitempty"`
	Lambda *float64 `yaml:"lambda,omitempty"`
}

// gammaLambda are the section's GAE γ and λ, defaults applied.
func (a *Advantages) gammaLambda() (float64, float64) {
	g, l := 1.0, 1.0
	if a != nil && a.Gamma != nil {
		g = *a.Gamma
	}
	if a != nil && a.Lambda != nil {
		l = *a.Lambda
	}
	return g, l
}

// Values of Advantages.Std.
const (
	StdSample     = "sample"
	StdPopulation = "population"
)

// populationStd reports whether the section asks for the population std.
func (a *Advantages) populationStd() bool { return a != nil && a.Std == StdPopulation }

// maskTruncated reports whether the section masks truncated samples.
func (a *Advantages) maskTruncated() bool { return a != nil && a.MaskTruncatedCompletions }

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

// Stage configures one stage of the loop: the keys every stage has, and
// its kind's own, decoded into Options.
type Stage struct {
	// Kind names a registered kind (kind.Registry): standin, command,
	// (sample) dataset, (reward) cel, (generate) rollout, (train) grpo or
	// external.
	Kind string `yaml:"kind"`
	// Env names the task environment (default: the stage's name).
	Env string `yaml:"env,omitempty"`
	// Version enters the cache key: bump it when the stage's code changes
	// meaning.
	Version string `yaml:"version,omitempty"`
	// Settings override the environment's for this stage.
	Settings *pipeline.Settings `yaml:"settings,omitempty"`
	// Options are the kind's own keys (the value its New returns), or,
	// for a kind with a section of its own, that section; nil for an
	// unknown kind.
	Options kind.Stage `yaml:"-"`

	section string // the top-level section Options come from, if any
}

// Load reads and parses a pipeline file whose stages name kinds of reg,
// with the command line's overrides (key.path=value) applied as Parse
// applies them.
func Load(path string, reg *kind.Registry, overrides ...string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read pipeline config: %w", err)
	}
	c, err := Parse(path, b, reg, overrides...)
	if err != nil {
		return nil, err
	}
	if c.Store != "" && isLocalPath(c.Store) && !filepath.IsAbs(c.Store) {
		c.Store = filepath.Join(filepath.Dir(path), c.Store)
	}
	for _, t := range c.Tracking {
		// A tracker's relative paths (a TensorBoard dir) are the file's.
		if r, ok := t.Options.(interface{ Rebase(dir string) }); ok {
			r.Rebase(filepath.Dir(path))
		}
	}
	return c, nil
}

// isLocalPath reports whether a store URI is a plain path (the embedded
// store) rather than scheme://...
func isLocalPath(uri string) bool {
	return !bytes.Contains([]byte(uri), []byte("://"))
}

// Parse parses and validates a pipeline config whose stages name kinds of
// reg; name labels positions in errors ("pipeline.yaml:12:5: ..."). Every
// problem found is reported, each as an *Error, joined.
//
// overrides are key.path=value settings of the command line, each value
// read as YAML (a scalar, [a, b] or {k: v}) and merged into the file's
// tree in order before it is checked: a key's value is replaced whole,
// missing parents are added, and a problem at an override names it
// ("override stages.train.lr=abc: ...") instead of a place in the file.
func Parse(name string, data []byte, reg *kind.Registry, overrides ...string) (c *Config, err error) {
	// The YAML library is third-party code fed arbitrary bytes: a panic in
	// it must not take the process down.
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, &Error{File: name, Msg: fmt.Sprintf("cannot parse the file (%v)", r)}
		}
	}()
	if reg == nil {
		reg = &kind.Registry{}
	}
	d := &decoder{file: name, pos: map[string]position{}, reg: reg, text: map[*ast.FloatNode]bool{}}
	// Numbers are read by the YAML 1.2 core schema: lr: 1e-3 is a float.
	f, err := yamlcore.Parse(data)
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
	var ovs []override
	if len(overrides) > 0 {
		if body, ovs, err = applyOverrides(body, overrides, name, bytes.Count(data, []byte("\n"))+1); err != nil {
			return nil, err
		}
	}
	d.walk(body, configType, "")
	if err := d.err(); err != nil {
		return nil, markOverrides(err, ovs)
	}
	// A key that takes a string keeps "1e3" as written, not the float's
	// "1000".
	body = yamlcore.Restore(body, func(n *ast.FloatNode) bool { return d.text[n] })
	// The walk has reported every unknown key, so the decoding need not be
	// strict. The stages' kinds and the policy's backend decode their own
	// keys (UnmarshalYAML).
	c = &Config{}
	ctx := context.WithValue(context.Background(), registryKey{}, reg)
	if err := yamlcore.Decode(ctx, body, c); err != nil {
		return nil, markOverrides(d.yamlError(err), ovs)
	}
	c.file, c.pos, c.reg, c.ovs = name, d.pos, reg, ovs
	c.applyDefaults()
	if err := c.validate(); err != nil {
		return nil, markOverrides(err, ovs)
	}
	return c, nil
}

// Overrides are the command line's key.path=value overrides the config
// was parsed with, in order.
func (c *Config) Overrides() []string {
	var out []string
	for _, o := range c.ovs {
		out = append(out, o.text)
	}
	return out
}

// File is the name the config was parsed under.
func (c *Config) File() string { return c.file }

// Registry is the registry the config was parsed with: what opens its
// trackers and policy.
func (c *Config) Registry() *kind.Registry { return c.reg }

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
