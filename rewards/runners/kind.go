package runners

import (
	"errors"
	"fmt"
	"io/fs"
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

// Compile loads and compiles the spec (kind.Scoring): the plan calls it
// once and hands the program to Task and to evaluation.
func (s *CELStage) Compile(b kind.Build) (kind.Scorer, error) {
	prog, err := s.compile(b)
	if err != nil {
		return nil, err
	}
	return prog, nil
}

func (s *CELStage) compile(b kind.Build) (*rewards.Program, error) {
	path := s.Spec
	if !filepath.IsAbs(path) {
		path = filepath.Join(b.File.Dir, path)
	}
	spec, err := rewards.LoadSpec(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, kind.At("spec", fmt.Errorf("reward spec %s not found at %s (a relative path is read from the pipeline file's folder): write the spec there, or fix spec",
			s.Spec, path))
	}
	if err != nil {
		return nil, kind.At("spec", err)
	}
	prog, err := Compile(spec)
	if err != nil {
		return nil, kind.At("spec", err)
	}
	return prog, nil
}

// Task is the reward task of the program Compile returned (b.Scorer);
// without one, as when a program builds the task itself, it compiles the
// spec.
func (s *CELStage) Task(b kind.Build) (*pipeline.Task, error) {
	prog, ok := b.Scorer.(*rewards.Program)
	if !ok {
		var err error
		if prog, err = s.compile(b); err != nil {
			return nil, err
		}
	}
	t := rewards.Task(prog)
	t.Env, t.Version = b.Env, b.Versioned(t.Version)
	return t, nil
}

var _ kind.Scoring = (*CELStage)(nil)
