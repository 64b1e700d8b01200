package runners

import (
	"path/filepath"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/rewards"
)

// CELKind is kind: cel, the reward stage that scores with a reward spec of
// CEL components, verifiers and judges (docs/REWARDS.md), compiled once.
var CELKind kind.Kind = celKind{}

type celKind struct{}

func (celKind) Name() string    { return "cel" }
func (celKind) Slots() []string { return []string{pipeline.SlotReward} }
func (celKind) New() kind.Stage { return &CELStage{} }
func (celKind) Noun() string    { return "a cel reward stage" }

// CELStage is a cel reward stage's keys.
type CELStage struct {
	// Spec is the reward spec file, relative to the pipeline file.
	Spec string `yaml:"spec,omitempty"`

	prog *rewards.Program // compiled by Task
}

// Check checks the slot and that there is a spec.
func (s *CELStage) Check(c kind.Checker) {
	if !kind.OnlyIn(c, pipeline.SlotReward, "can be a cel reward spec") {
		return
	}
	if s.Spec == "" {
		c.Fail("", "e.g. spec: reward.yaml", "%s: a cel reward stage needs spec (a reward spec file, see docs/REWARDS.md)", c.Path(""))
	}
}

// Task compiles the spec (once: evaluation reuses the program) and is
// the reward task.
func (s *CELStage) Task(b kind.Build) (*pipeline.Task, error) {
	path := s.Spec
	if !filepath.IsAbs(path) {
		path = filepath.Join(b.File.Dir, path)
	}
	spec, err := rewards.LoadSpec(path)
	if err == nil {
		s.prog, err = Compile(spec)
	}
	if err != nil {
		return nil, kind.At("spec", err)
	}
	t := rewards.Task(s.prog)
	t.Env, t.Version = b.Env, b.Versioned(t.Version)
	return t, nil
}

// Scorer is the compiled program, once Task has run.
func (s *CELStage) Scorer() kind.Scorer {
	if s.prog == nil {
		return nil
	}
	return s.prog
}
