package embedded

import (
	"errors"
	"fmt"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
	policyembedded "github.com/rlpipe/rlpipe/policy/embedded"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// GRPOKind is kind: grpo, the train stage that runs GRPO on a LoRA adapter
// of the embedded model. Its hyperparameters are the file's top-level
// trainer: section (Options' keys).
var GRPOKind kind.Kind = grpoKind{}

type grpoKind struct{}

func (grpoKind) Name() string    { return "grpo" }
func (grpoKind) Slots() []string { return []string{pipeline.SlotTrain} }
func (grpoKind) New() kind.Stage { return &GRPOStage{} }
func (grpoKind) Section() string { return "trainer" }

// GRPOStage is a grpo stage: the trainer section's options, zero fields
// at their defaults.
type GRPOStage Options

var _ kind.Advantaged = (*GRPOStage)(nil)

// Check checks the slot, the policy and the options (defaults applied).
func (s *GRPOStage) Check(c kind.Checker) {
	if !kind.OnlyIn(c, pipeline.SlotTrain, "can be grpo") {
		return
	}
	if c.File().Policy != policyembedded.Kind {
		c.Fail("kind", "set policy: {kind: embedded}, or train with kind: command (the external trainer contract)",
			"%s: the grpo stage trains the embedded model, so the policy must be kind: embedded", c.Path("kind"))
	}
	o := Options(*s)
	o.EnsureDefaults()
	var oe *OptionError
	if err := o.Validate(); errors.As(err, &oe) {
		c.Fail("/trainer."+oe.Key, "", "%s: %s", c.Path("/trainer."+oe.Key), oe.Msg)
	} else if err != nil {
		c.Fail("/trainer", "", "trainer: %v", err)
	}
}

// Advantages are the options of the advantages the stage trains on
// (no_std, keep_zero_std): the loop computes them in their own step
// (kind.Advantaged).
func (s *GRPOStage) Advantages() advantages.TrainOptions { return Options(*s).advantages() }

// Task is the embedded trainer with the options.
func (s *GRPOStage) Task(b kind.Build) (*pipeline.Task, error) {
	var m *tiny.Model
	if b.Policy != nil {
		m, _ = b.Policy.Model.(*tiny.Model)
	}
	if m == nil {
		return nil, fmt.Errorf("the grpo stage trains the embedded model; set policy: {kind: embedded}")
	}
	t := Task(m, Options(*s))
	t.Env, t.Version = b.Env, b.Versioned(t.Version)
	return t, nil
}
