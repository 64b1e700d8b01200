package harbor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/agent"
)

// PipelineOptions are the harbor environment's rl_options in an episodes
// stage of pipeline.yaml:
//
//	generate:
//	  kind: episodes
//	  rl_env: harbor
//	  rl_options: {tasks: tasks}
type PipelineOptions struct {
	// Tasks is the directory of Harbor tasks (or one task), relative to
	// the pipeline file: the one `rlpipe dataset harbor` read.
	Tasks string `json:"tasks"`
	// WorldCache is where built worlds are kept (default: the user's
	// cache directory, rlpipe/worlds).
	WorldCache string `json:"world_cache,omitempty"`
	// TimeoutS, MemoryMB and Procs bound each tool call and the verifier
	// (0: the sandbox's defaults; the task's timeouts bound them too).
	TimeoutS float64 `json:"timeout_s,omitempty"`
	MemoryMB int     `json:"memory_mb,omitempty"`
	Procs    int     `json:"procs,omitempty"`
	// ObservationBytes bounds stdout and stderr in an observation.
	ObservationBytes int `json:"observation_bytes,omitempty"`
}

// PromptMeta is what a prompt row's metadata holds for a Harbor task
// (`rlpipe dataset harbor` writes it): the task's name and its directory
// relative to the tasks directory.
type PromptMeta struct {
	Task string `json:"harbor_task"`
	Path string `json:"path"`
}

// Prompts are the prompts table of tasks, one row per task: its
// instruction as the prompt, its name as the prompt id, PromptMeta as the
// metadata. dir is the tasks directory the paths are relative to.
func Prompts(tasks []*Task, dir string) ([]tables.Prompt, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	rows := make([]tables.Prompt, 0, len(tasks))
	for _, t := range tasks {
		rel, err := filepath.Rel(abs, t.Dir)
		if err != nil {
			return nil, err
		}
		meta, err := json.Marshal(PromptMeta{Task: t.Name, Path: filepath.ToSlash(rel)})
		if err != nil {
			return nil, err
		}
		rows = append(rows, tables.Prompt{PromptID: t.Name, Prompt: t.Instruction, Metadata: string(meta), Source: "harbor"})
	}
	return rows, nil
}

// RLEnv is the harbor environment as an episodes stage's rl_env: the
// tasks of rl_options.tasks, each world built once into the world cache;
// each episode's task named by its prompt row (PromptMeta, else the
// prompt id). The verifier's outcome is in the row's env_outcome
// (info.reward_components, info.verifier_status, …).
var RLEnv = environments.Typed("harbor", openRLEnv)

// openRLEnv reads the tasks, builds (or finds) their worlds and returns the
// per-prompt maker; the version is the digest of every task's name,
// instruction, timeouts, worlds and [verifier] env (sorted by key).
func openRLEnv(o *PipelineOptions, dir string) (environments.Maker, string, error) {
	if o == nil || o.Tasks == "" {
		return nil, "", errors.New("tasks is missing: add rl_options: {tasks: DIR}, the directory of Harbor tasks")
	}
	src := o.Tasks
	if !filepath.IsAbs(src) {
		src = filepath.Join(dir, src)
	}
	tasks, _, err := LoadDir(src) // refused tasks have no prompts (rlpipe dataset harbor lists them)
	if err != nil {
		return nil, "", err
	}
	cache, err := agent.OpenCache(o.WorldCache)
	if err != nil {
		return nil, "", err
	}
	eo := &Options{ObservationBytes: o.ObservationBytes, Limits: agent.OptionLimits(o.TimeoutS, o.MemoryMB, o.Procs)}
	type opened struct {
		task         *Task
		world, tests *agent.World
	}
	byName := map[string]opened{}
	h := sha256.New()
	for _, t := range tasks {
		world, tests, err := t.Worlds(context.Background(), cache)
		if err != nil {
			return nil, "", err
		}
		byName[t.Name] = opened{t, world, tests}
		fmt.Fprintf(h, "%q %q %s %s %v %v\n", t.Name, t.Instruction, world.Digest, tests.Digest, t.AgentTimeout(), t.VerifierTimeout())
		// [verifier] env changes what test.sh scores; a task without it
		// hashes as before, so only the tasks that set it get a new version.
		for _, k := range slices.Sorted(maps.Keys(t.Config.Verifier.Env)) {
			fmt.Fprintf(h, "verifier env %q=%q\n", k, t.Config.Verifier.Env[k])
		}
	}
	mk := func(p tables.Prompt) (environments.Env, error) {
		name := p.PromptID
		var meta PromptMeta
		if p.Metadata != "" && json.Unmarshal([]byte(p.Metadata), &meta) == nil && meta.Task != "" {
			name = meta.Task
		}
		op, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("prompt %s: no harbor task %q in %s (make the prompts with rlpipe dataset harbor %s)", p.PromptID, name, src, o.Tasks)
		}
		return NewEnv(op.task, op.world, op.tests, eo)
	}
	return mk, "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
