package rollouts

import (
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
)

// The kinds this package provides: the sample and generate stages.
var (
	// DatasetKind is kind: dataset, the sample stage that reads the next
	// batch_size prompts of the dataset, exactly once.
	DatasetKind kind.Kind = datasetKind{}
	// RolloutKind is kind: rollout, the generate stage that samples from
	// the policy section (docs/PIPELINE.md).
	RolloutKind kind.Kind = rolloutKind{}
)

type datasetKind struct{}

func (datasetKind) Name() string    { return "dataset" }
func (datasetKind) Slots() []string { return []string{pipeline.SlotSample} }
func (datasetKind) New() kind.Stage { return &DatasetStage{} }

// DatasetStage is a dataset stage: it has no keys of its own.
type DatasetStage struct{}

// Check checks the slot.
func (*DatasetStage) Check(c kind.Checker) { kind.OnlyIn(c, pipeline.SlotSample, "reads the dataset") }

// Task is SampleTask.
func (*DatasetStage) Task(b kind.Build) (*pipeline.Task, error) {
	t := SampleTask()
	t.Env, t.Version = b.Env, b.Versioned(t.Version)
	return t, nil
}

type rolloutKind struct{}

func (rolloutKind) Name() string    { return "rollout" }
func (rolloutKind) Slots() []string { return []string{pipeline.SlotGenerate} }
func (rolloutKind) New() kind.Stage { return &RolloutStage{} }

// RolloutStage is a rollout stage's keys.
type RolloutStage struct {
	Sampling *Sampling `yaml:"sampling,omitempty"`
	// Batch is how many prompts go to the policy in one call (default 64).
	Batch int `yaml:"batch,omitempty"`
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

// keys are the sampling keys every stage that samples takes, n aside.
func (s *Sampling) keys() kind.Sampling {
	return kind.Sampling{Temperature: s.Temperature, TopP: s.TopP, MaxTokens: s.MaxTokens, Stop: s.Stop}
}

// GroupSize is sampling.n, the samples per prompt (kind.Grouped).
func (s *RolloutStage) GroupSize() (string, int) {
	if s.Sampling == nil {
		return "sampling.n", 0
	}
	return "sampling.n", s.Sampling.N
}

// SamplesPolicy marks the stage as the policy section's user.
func (*RolloutStage) SamplesPolicy() {}

// Check checks the slot, the policy section and the sampling.
func (s *RolloutStage) Check(c kind.Checker) {
	if !kind.OnlyIn(c, pipeline.SlotGenerate, "can be a rollout") {
		return
	}
	if c.File().Policy == "" {
		c.Fail("", "add a policy section, e.g. policy: {kind: embedded, model: tiny-arith}", "%s: a rollout stage samples from the policy section, which is missing", c.Path(""))
	}
	sp := s.Sampling
	if sp == nil {
		c.Fail("", "e.g. sampling: {n: 8, temperature: 1.0, max_tokens: 8}", "%s: a rollout stage needs sampling", c.Path(""))
		return
	}
	if sp.N < 1 {
		c.Fail("sampling.n", "the group size G, e.g. 8", "%s: must be at least 1, got %d", c.Path("sampling.n"), sp.N)
		return
	}
	if sp.keys().Check(c, "") && s.Batch < 0 {
		c.Fail("batch", "", "%s: cannot be negative, got %d", c.Path("batch"), s.Batch)
	}
}

// Task samples from the opened policy.
func (s *RolloutStage) Task(b kind.Build) (*pipeline.Task, error) {
	sp := s.Sampling.keys().Policy()
	sp.N, sp.Logprobs = s.Sampling.N, true
	o := Options{Policy: b.Policy.Policy, Identity: b.Policy.Identity, Sampling: sp, Batch: s.Batch, Env: b.Env,
		AdapterRoot: b.Policy.AdapterRoot, Adapters: b.Policy.Adapters()}
	t, err := Task(o)
	if err != nil {
		return nil, err
	}
	t.Version = b.Versioned(t.Version)
	return t, nil
}
