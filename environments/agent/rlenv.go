package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
)

// PipelineOptions are an agent environment's rl_options in an episodes
// stage of pipeline.yaml:
//
//	generate:
//	  kind: episodes
//	  rl_env: agent
//	  rl_options: {world: world, timeout_s: 20}
type PipelineOptions struct {
	// World is the directory copied into the world, relative to the
	// pipeline file.
	World string `json:"world"`
	// WorldCache is where built worlds are kept (default: the user's
	// cache directory, rlpipe/worlds).
	WorldCache string `json:"world_cache,omitempty"`
	// TimeoutS, MemoryMB and Procs bound each tool call, the Run phase
	// and the verifier (0: the sandbox's defaults).
	TimeoutS float64 `json:"timeout_s,omitempty"`
	MemoryMB int     `json:"memory_mb,omitempty"`
	Procs    int     `json:"procs,omitempty"`
	// ObservationBytes bounds stdout and stderr in an observation (0:
	// DefaultObservationBytes).
	ObservationBytes int `json:"observation_bytes,omitempty"`
	// Tools offers bash, read_file, write_file and submit in the
	// function-calling format (Options.Tools); the fenced bash block
	// stays the fallback. Left out of the cache key when false.
	Tools bool `json:"tools,omitempty"`
	// NoHelp gives the policy the task's instruction alone (Options.NoHelp),
	// for a model pretrained on the tools.
	NoHelp bool `json:"no_help,omitempty"`
	// EndOnMalformed judges the episode at a reply whose tool calls cannot
	// be read (Options.EndOnMalformed).
	EndOnMalformed bool `json:"end_on_malformed,omitempty"`
	// MaxReplies judges the episode after that many replies
	// (Options.MaxReplies); 0: no budget but the stage's max_turns.
	MaxReplies int `json:"max_replies,omitempty"`
}

// PromptTask is what a prompt row's metadata holds for an agent episode,
// beside the instruction (the row's prompt): the fields of Task, with
// Checks as text.
type PromptTask struct {
	Protected []string          `json:"protected,omitempty"`
	Run       string            `json:"run,omitempty"`
	Checks    map[string]string `json:"checks,omitempty"`
	Verifier  string            `json:"verifier"`
	// Files are written into the episode's workspace (Task.Files).
	Files map[string]string `json:"files,omitempty"`
}

// TaskOf reads the agent task of a prompt: its prompt (or its last
// message) is the instruction, its metadata a PromptTask.
func TaskOf(p tables.Prompt) (Task, error) {
	var pt PromptTask
	if p.Metadata != "" {
		if err := json.Unmarshal([]byte(p.Metadata), &pt); err != nil {
			return Task{}, fmt.Errorf("prompt %s: metadata is not an agent task ({protected, run, checks, verifier}): %w", p.PromptID, err)
		}
	}
	if pt.Verifier == "" {
		return Task{}, fmt.Errorf("prompt %s: its metadata has no verifier: an agent task needs one (docs/ROLLOUTS.md)", p.PromptID)
	}
	t := Task{Instruction: p.Prompt, Protected: pt.Protected, Run: pt.Run, Verifier: pt.Verifier}
	if t.Instruction == "" && len(p.Messages) > 0 {
		t.Instruction = p.Messages[len(p.Messages)-1].Content
	}
	if t.Instruction == "" {
		return Task{}, fmt.Errorf("prompt %s: no instruction: its prompt is empty", p.PromptID)
	}
	if len(pt.Files) > 0 {
		t.Files = make(map[string][]byte, len(pt.Files))
		for name, text := range pt.Files {
			t.Files[name] = []byte(text)
		}
	}
	if len(pt.Checks) > 0 {
		t.Checks = make(map[string][]byte, len(pt.Checks))
		for name, text := range pt.Checks {
			t.Checks[name] = []byte(text)
		}
	}
	return t, nil
}

// RLEnv is the agent environment as an episodes stage's rl_env: the world
// from its options, built once into the world cache; the task of each
// episode from its prompt row (TaskOf); every tool call, Run and verifier
// in the sandbox. The episode's verdict is in its row's env_outcome
// (info.verifier_verdict, info.verifier_status, …), for the reward stage
// to read.
var RLEnv = environments.Typed("agent", openRLEnv)

// openRLEnv builds (or finds) the world and returns the per-prompt maker; the
// version is the world's digest.
func openRLEnv(o *PipelineOptions, dir string) (environments.Maker, string, error) {
	if o == nil || o.World == "" {
		return nil, "", errors.New("world is missing: add rl_options: {world: DIR}, the directory copied into each episode's workspace")
	}
	if o.MaxReplies < 0 {
		return nil, "", fmt.Errorf("max_replies %d: want a number of replies ≥ 0 (0: no budget but the stage's max_turns)", o.MaxReplies)
	}
	src := o.World
	if !filepath.IsAbs(src) {
		src = filepath.Join(dir, src)
	}
	if fi, err := os.Stat(src); err != nil || !fi.IsDir() {
		return nil, "", fmt.Errorf("world %s is not a directory (relative paths are taken from the pipeline file's directory)", src)
	}
	cache, err := OpenCache(o.WorldCache)
	if err != nil {
		return nil, "", err
	}
	world, err := cache.World(context.Background(), WorldSpec{Name: filepath.Base(src), Source: src})
	if err != nil {
		return nil, "", err
	}
	eo := &Options{ObservationBytes: o.ObservationBytes, Tools: o.Tools, NoHelp: o.NoHelp, EndOnMalformed: o.EndOnMalformed, MaxReplies: o.MaxReplies, Limits: OptionLimits(o.TimeoutS, o.MemoryMB, o.Procs)}
	mk := func(p tables.Prompt) (environments.Env, error) {
		t, err := TaskOf(p)
		if err != nil {
			return nil, err
		}
		return NewEnv(world, t, eo)
	}
	return mk, world.Digest, nil
}
