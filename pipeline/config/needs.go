package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/policy"
)

// ErrCapability marks a plug-in the config names (a policy backend, a
// stage kind) that lacks a capability the loop will need: Plan refuses
// the config before any task runs, naming the key and the capability.
var ErrCapability = fmt.Errorf("%w: a plug-in lacks a capability the loop needs", pipeline.ErrConfig)

// needs checks what the loop will ask of the opened policy beyond
// sampling: a policy that the loop samples from a trained adapter must
// load adapters (policy.AdapterLoader). The config's checks cannot tell,
// since only the opened value says what it implements.
func (c *Config) needs(p *Plan) error {
	if p.Policy == nil {
		return nil
	}
	if wt, ok := c.Stages.Train.Options.(kind.WeightsTrainer); ok && wt.TrainsWeights() {
		return c.needsWeights(p)
	}
	if _, ok := p.Policy.Policy.(policy.AdapterLoader); ok {
		return nil
	}
	why := c.adapterUse()
	if why == "" {
		return nil
	}
	others := slices.DeleteFunc(c.reg.Policies.Kinds(), func(k string) bool { return k == c.Policy.Kind })
	hint := "implement policy.AdapterLoader in the backend"
	if len(others) > 0 {
		hint = "use kind " + strings.Join(others, " or ") + ", or " + hint
	}
	return c.capabilityError("policy.kind", hint, "policy.kind: policy kind %s cannot load adapters (policy.AdapterLoader), which %s", c.Policy.Kind, why)
}

// needsWeights is needs for a train stage that writes full weights: the
// policy the loop samples them from must load weights
// (policy.WeightsLoader).
func (c *Config) needsWeights(p *Plan) error {
	if _, ok := p.Policy.Policy.(policy.WeightsLoader); ok {
		return nil
	}
	why := c.adapterUse()
	if why == "" {
		return nil
	}
	why = strings.ReplaceAll(why, "adapter", "weights")
	return c.capabilityError("policy.kind", "train a LoRA adapter (remove trainer.lora: none), or implement policy.WeightsLoader in the backend",
		"policy.kind: policy kind %s cannot load full weights (policy.WeightsLoader), and the train stage writes them (lora: none); %s", c.Policy.Kind, why)
}

// adapterUse says why the loop samples the policy section from an
// adapter directory, or "" when it never does: the generate stage
// samples the policy from the adapter of an earlier iteration (from
// iteration max_staleness+2, or from the first with initial_policy), and
// evaluation samples each checkpoint's adapter.
func (c *Config) adapterUse() string {
	g := c.Stages.Generate
	_, samples := g.Options.(kind.Sampler)
	if samples {
		if c.InitialPolicy != "" {
			return "the loop needs from iteration 1 to sample stages.generate from initial_policy"
		}
		if first := c.Overlap.MaxStaleness + 2; c.Iterations >= first {
			return fmt.Sprintf("the loop needs from iteration %d to sample stages.generate from the adapter trained before", first)
		}
	}
	if c.Eval != nil {
		// A generate stage that samples the eval set its own way without
		// the policy section (a stand-in) loads no adapter.
		_, own := g.Options.(kind.EvalGenerator)
		if !own || samples {
			return "eval needs to sample the eval set from each checkpoint's adapter"
		}
	}
	return ""
}

// capabilityError is an ErrCapability at path's place in the file.
func (c *Config) capabilityError(path, hint, format string, a ...any) error {
	pos := c.at(path)
	e := &Error{File: c.file, Line: pos.line, Column: pos.col, Path: path, Msg: fmt.Sprintf(format, a...), Hint: hint, kind: ErrCapability}
	markOverride(e, c.ovs)
	return e
}
