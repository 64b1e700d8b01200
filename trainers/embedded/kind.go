package embedded

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/policy"
	policyembedded "github.com/rlpipe/rlpipe/policy/embedded"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// GRPOKind is kind: grpo, the train stage that runs GRPO on a LoRA adapter
// of the embedded model. Its hyperparameters are the file's top-level
// trainer: section (Options' keys). The policy is the embedded model, or a
// server (kind: openai, e.g. vLLM) serving the embedded model's export
// (`rlpipe policy export`) under its name: policy.model then names the
// embedded model the trainer loads (tiny-arith, tiny-chain, tiny-rg, tiny-tool or
// a .safetensors file), and the server must serve those same weights.
var GRPOKind = kind.InSection(kind.Of[GRPOStage]("grpo", pipeline.SlotTrain), "trainer")

// GRPOStage is a grpo stage: the trainer section's options, zero fields
// at their defaults.
type GRPOStage Options

var _ kind.Stepped = (*GRPOStage)(nil)

var _ kind.WeightsTrainer = (*GRPOStage)(nil)

// TrainsWeights says that the stage writes full weights (lora: none).
func (s *GRPOStage) TrainsWeights() bool { return s.LoRA.None }

// Check checks the slot, the policy and the options (defaults applied).
func (s *GRPOStage) Check(c kind.Checker) {
	if !kind.OnlyIn(c, pipeline.SlotTrain, "can be grpo") {
		return
	}
	if f := c.File(); f.Policy != policyembedded.Kind && !embeddedModel(f.PolicyModel) {
		c.Fail("kind", "set policy: {kind: embedded}, serve the embedded model's export (rlpipe policy export) under its name, e.g. policy: {kind: openai, model: tiny-arith}, or train with kind: external",
			"%s: the grpo stage trains the embedded model, so the policy must be it: kind embedded, or a server whose model is %s or a .safetensors file (not %q)", c.Path("kind"), policyembedded.ShippedNames(), f.PolicyModel)
	}
	o := Options(*s)
	if o.Loss != "" {
		l, err := policyLoss(c.File().Losses, o.Loss)
		if err != nil {
			c.Fail("/trainer.loss", "", "%s: %v", c.Path("/trainer.loss"), err)
			return
		}
		o.PolicyLoss = l
	}
	if !checkPPO(c, &o) {
		return
	}
	o.EnsureDefaults()
	var oe *OptionError
	if err := o.Validate(); errors.As(err, &oe) {
		c.Fail("/trainer."+oe.Key, "", "%s: %s", c.Path("/trainer."+oe.Key), oe.Msg)
	} else if err != nil {
		c.Fail("/trainer", "", "trainer: %v", err)
	}
}

// embeddedModel reports whether a policy's model key names an embedded
// model: a shipped one or a .safetensors file.
func embeddedModel(model string) bool {
	return policyembedded.Shipped(model) || strings.HasSuffix(model, ".safetensors")
}

// Steps are the advantages step (advantages.Step) with the options of
// the advantages the stage trains on (no_std, keep_zero_std): the loop
// computes them in their own step, between reward and train.
func (s *GRPOStage) Steps(b kind.Build) ([]pipeline.Step, error) {
	o := Options(*s).advantages()
	o.Estimator, o.PopulationStd = b.Estimator, b.PopulationStd
	o.Gamma, o.Lambda = b.Gamma, b.Lambda
	o.MaskTruncated = b.MaskTruncated
	return []pipeline.Step{advantages.Step(o)}, nil
}

// Trainable is what the grpo stage needs of the opened policy's model
// (policy.Opened.Model), found by type assertion: the embedded engine's
// weights, whose LoRA adapter it trains. *tiny.Model is one.
type Trainable interface {
	policy.Local
	TinyModel() *tiny.Model
}

var _ Trainable = (*tiny.Model)(nil)

// Task is the embedded trainer with the options.
func (s *GRPOStage) Task(b kind.Build) (*pipeline.Task, error) {
	var m *tiny.Model
	if b.Policy != nil {
		if t, ok := b.Policy.Model.(Trainable); ok {
			m = t.TinyModel()
		}
	}
	if m == nil && embeddedModel(b.File.PolicyModel) {
		// A server samples from the embedded model's export: train the
		// embedded weights it was exported from.
		path := b.File.PolicyModel
		if strings.HasSuffix(path, ".safetensors") && !filepath.IsAbs(path) {
			path = filepath.Join(b.File.Dir, path)
		}
		var err error
		if m, err = policyembedded.Load(path); err != nil {
			return nil, fmt.Errorf("the grpo stage trains the model policy.model names: %w", err)
		}
	}
	if m == nil {
		return nil, fmt.Errorf("the grpo stage trains the embedded model; set policy: {kind: embedded}, or policy.model to an embedded model a server serves")
	}
	o := Options(*s)
	if o.Loss != "" {
		l, err := policyLoss(b.File.Losses, o.Loss)
		if err != nil {
			return nil, fmt.Errorf("trainer.loss: %w", err)
		}
		o.PolicyLoss = l
	}
	o.GAE = gaeOptions(b.Estimator, b.Gamma, b.Lambda)
	t := Task(m, o)
	t.Env, t.Version = b.Env, b.Versioned(t.Version)
	return t, nil
}

// policyLoss is the registry's loss named name, which must be one the
// embedded trainer computes (a grpo.PolicyLoss).
func policyLoss(ls kind.Losses, name string) (grpo.PolicyLoss, error) {
	l, err := ls.Lookup(name)
	if err != nil {
		return nil, err
	}
	pl, ok := l.(grpo.PolicyLoss)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not a loss the embedded trainer computes (it computes trainers/grpo.PolicyLoss values)", kind.ErrUnknownLoss, name)
	}
	return pl, nil
}

// EnsureDefaults fills in the options' defaults, as the trainer does
// before it trains: what `rlpipe compare` shows as the effective config.
func (s *GRPOStage) EnsureDefaults() { (*Options)(s).EnsureDefaults() }
