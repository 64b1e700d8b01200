package rollouts

import (
	"context"
	"errors"
	"fmt"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/policy"
)

// Version is the rollout code's version; it enters every rollout task's
// cache key, so bump it when the way trajectories are written changes.
const Version = "rollout-1"

// Options configure a rollout task.
type Options struct {
	// Policy generates the samples. It is shared by every call of the
	// task, so it must be safe for concurrent use.
	Policy policy.Policy
	// Identity names the policy for the cache key and the trajectories'
	// policy_version: the base model and where it runs ("tiny-arith@ab12…",
	// "Qwen/Qwen2.5-0.5B-Instruct"). A different identity is different work.
	Identity string
	// Sampling is the sampling of every request; Sampling.Adapter is set
	// per call from the policy input.
	Sampling policy.Sampling
	// Batch is how many prompts go to the policy in one Generate call
	// (default 64): large enough to batch on the embedded model, small
	// enough that cancellation is prompt.
	Batch int
	// AdapterRoot, when set, is a directory the policy's server can read
	// (a shared mount for a remote vLLM): each adapter is copied to
	// AdapterRoot/<name> before it is loaded. Empty loads the adapter from
	// the task's scratch copy, which suits servers that read the adapter
	// when it is loaded (vLLM, `rlpipe policy serve`) on this machine.
	AdapterRoot string
	// KeepAdapters is how many adapters stay loaded (default 3): older ones
	// are unloaded when a new one arrives.
	KeepAdapters int
	// Adapters, when set, is the loader to use instead of one of the
	// task's own (AdapterRoot and KeepAdapters are then its): the opened
	// policy's, shared with the other stages that sample from it.
	Adapters *policy.Adapters
	// Env is the task environment (default "generate").
	Env string
}

// Params are the loop's parameters of a generate call.
type Params struct {
	Iteration       int `json:"iteration"`
	PolicyIteration int `json:"policy_iteration"`
	Staleness       int `json:"staleness"`
}

// Task returns the generate stage: it reads the prompts input and, when
// present, the policy input (a PEFT adapter directory), samples
// Sampling.N completions per prompt, and writes the trajectories table,
// one row per sample in (prompt, sample index) order, with each sample's
// status, policy version and seed. A sample that could not be generated
// is a row with a non-ok status and its error, never an empty success.
func Task(o Options) (*pipeline.Task, error) {
	if o.Policy == nil {
		return nil, errors.New("rollouts: no policy")
	}
	if err := policy.Validate(nil, o.Sampling); err != nil {
		return nil, fmt.Errorf("rollouts: %w", err)
	}
	if o.Batch <= 0 {
		o.Batch = policy.DefaultBatch
	}
	if o.Env == "" {
		o.Env = "generate"
	}
	g := &generator{o: o, src: policy.NewSource(o.Policy, o.Identity, o.Adapters, o.AdapterRoot, o.KeepAdapters)}
	version, err := g.version()
	if err != nil {
		return nil, fmt.Errorf("rollouts: %w", err)
	}
	return pipeline.GenerateTask("generate", version, o.Env, g.run), nil
}

// generator holds what calls of one rollout task share: the policy and
// which adapters it has loaded.
type generator struct {
	o   Options
	src policy.Source
}

// version is the task's cache version: the code, the policy's identity and
// the sampling parameters, which fail to encode when JSON cannot hold
// them (a NaN temperature).
func (g *generator) version() (string, error) {
	s := g.o.Sampling
	s.Adapter = ""
	v, err := pipeline.CodeDigest(Version, struct {
		Code, Identity string
		Sampling       policy.Sampling
		Logprobs       string `json:",omitempty"` // "tempered" at T ≠ 0, 1
	}{Version, g.o.Identity, s, s.TemperedLogprobs()})
	if err != nil {
		return "", fmt.Errorf("version of the generate task: encode the sampling parameters: %w", err)
	}
	return v, nil
}

func (g *generator) run(ctx context.Context, tc *pipeline.TaskContext) error {
	var p Params
	if err := tc.Params(&p); err != nil {
		return err
	}
	prompts, err := readPrompts(tc.InputPath("prompts"))
	if err != nil {
		return pipeline.Permanent(err)
	}
	rows, err := g.src.Rows(ctx, tc.InputPath("policy"), prompts, policy.RowsOptions{Sampling: g.o.Sampling,
		Seed: tc.Seed, Batch: g.o.Batch, Row: policy.RowParams{Iteration: p.Iteration, Staleness: p.Staleness}})
	if errors.Is(err, policy.ErrAdapterInput) {
		return pipeline.Permanent(err)
	}
	if err != nil {
		return fmt.Errorf("generate iteration %d: %w", p.Iteration, err)
	}
	return writeTrajectories(tc.OutputPath(pipeline.OutTrajectories), rows)
}

func readPrompts(path string) ([]tables.Prompt, error) {
	if path == "" {
		return nil, errors.New("generate: no prompts input")
	}
	return tables.ReadFile(path, tables.Prompts)
}

func writeTrajectories(path string, rows []tables.Trajectory) error {
	return tables.WriteFile(path, tables.Trajectories, rows, nil)
}
