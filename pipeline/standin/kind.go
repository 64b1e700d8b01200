package standin

import (
	"fmt"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
)

// Kind is the stand-ins' stage kind, kind: standin, for any slot.
var Kind = kind.Of[Stage]("standin", pipeline.SlotNames()...)

// Stage is a stand-in stage's keys.
type Stage struct {
	Sleep            time.Duration `yaml:"sleep,omitempty"`
	FailTimes        int           `yaml:"fail_times,omitempty"`
	SamplesPerPrompt int           `yaml:"samples_per_prompt,omitempty"` // generate only
	JudgeURL         string        `yaml:"judge_url,omitempty"`          // reward only
}

// Check checks the knobs against the slot.
func (s *Stage) Check(c kind.Checker) {
	if c.Set("samples_per_prompt") && c.Slot() != pipeline.SlotGenerate {
		c.Fail("samples_per_prompt", "set it on the generate stage", "%s: only the generate stage samples", c.Path("samples_per_prompt"))
	}
	if c.Set("judge_url") && c.Slot() != pipeline.SlotReward {
		c.Fail("judge_url", "set it on the reward stage", "%s: only the reward stage calls a judge", c.Path("judge_url"))
	}
	if s.FailTimes < 0 || s.SamplesPerPrompt < 0 || s.Sleep < 0 {
		c.Fail("", "", "%s: sleep, fail_times and samples_per_prompt cannot be negative", c.Path(""))
	}
}

// GroupSize is samples_per_prompt (kind.Grouped; 0 when unset: the
// stand-in's default).
func (s *Stage) GroupSize() (string, int) { return "samples_per_prompt", s.SamplesPerPrompt }

// Task is the slot's stand-in with the stage's knobs.
func (s *Stage) Task(b kind.Build) (*pipeline.Task, error) {
	o := Options{Envs: map[string]string{b.Slot: b.Env}, FailTimes: map[string]int{b.Slot: s.FailTimes},
		SamplesPerPrompt: s.SamplesPerPrompt, JudgeURL: s.JudgeURL}
	switch b.Slot {
	case pipeline.SlotSample:
		o.SampleSleep = s.Sleep
	case pipeline.SlotGenerate:
		o.GenerateSleep = s.Sleep
	case pipeline.SlotReward:
		o.RewardSleep = s.Sleep
	case pipeline.SlotTrain:
		o.TrainSleep = s.Sleep
	}
	all := Stages(o)
	t := map[string]*pipeline.Task{pipeline.SlotSample: all.Sample, pipeline.SlotGenerate: all.Generate,
		pipeline.SlotReward: all.Reward, pipeline.SlotTrain: all.Train}[b.Slot]
	t.Version = b.Versioned(t.Version)
	return t, nil
}

// EvalGenerate is the eval section's generate task for a stand-in
// generate stage (kind.EvalGenerator): n completions of each problem of
// the eval set from the checkpoint, made as the stage makes its own and
// seeded with the section's seed, so that a run of stand-ins can be
// evaluated and its evaluations benchmarked without a policy.
func (s *Stage) EvalGenerate(e kind.Eval, b kind.Build) (*pipeline.Task, error) {
	n := e.Sampling.Samples()
	o := Options{SamplesPerPrompt: n, GenerateSleep: s.Sleep}
	return &pipeline.Task{Name: "eval-generate", Version: b.Versioned(fmt.Sprintf("standin-eval-1-n%d-seed%d", n, e.Seed)),
		Env: b.Env, Deterministic: true,
		Outputs: []pipeline.Output{{Name: pipeline.OutTrajectories, File: runs.TrajectoriesFile, Check: check(tables.Trajectories)}},
		Run:     o.evalGenerate(e.Seed)}, nil
}
