package policy

import (
	"context"
	"errors"
	"fmt"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// DefaultBatch is how many prompts Checkpoint.Rows sends to the policy in
// one Generate call when the caller names no batch: large enough to batch
// on the embedded model, small enough that cancellation is prompt.
const DefaultBatch = 64

// Source is what a generate task samples from: the policy, the identity
// that names its base model in cache keys and policy versions, and the
// loader of the checkpoints' adapters. Rollouts, evaluation and episodes
// each hold one; Rows is the generate
// task's sampling, Checkpoint its first step for a task that samples in
// its own way (episodes).
type Source struct {
	Policy   Policy
	Identity string
	Adapters *Adapters
}

// NewSource is the source of a task's policy p, named identity. shared,
// when set, is the loader to use (the opened policy's, Opened.Adapters,
// shared by every stage that samples from it); nil makes the task a
// loader of its own, NewAdapters(p, identity, root, keep).
func NewSource(p Policy, identity string, shared *Adapters, root string, keep int) Source {
	if shared == nil {
		shared = NewAdapters(p, identity, root, keep)
	}
	return Source{Policy: p, Identity: identity, Adapters: shared}
}

// Checkpoint makes the task's policy input ready to sample from: dir is
// the input's adapter directory ("" samples the base model). It loads the
// adapter through Adapters and returns s with Sampling.Adapter set to the
// adapter's name, and the version its rows carry, Identity or
// "Identity+adapter-<12 hex>". Its errors are Adapters.Load's: those that
// match ErrAdapterInput cannot be fixed by retrying.
func (src Source) Checkpoint(ctx context.Context, dir string, s Sampling) (*Checkpoint, error) {
	c := &Checkpoint{src: src, Sampling: s, Version: src.Identity}
	if dir == "" {
		return c, nil
	}
	name, err := src.Adapters.Load(ctx, dir)
	if err != nil {
		return nil, err
	}
	c.Sampling.Adapter, c.Version = name, src.Identity+"+"+name
	return c, nil
}

// Checkpoint is a policy with a task's checkpoint loaded: the sampling
// that selects it and the version that names it.
type Checkpoint struct {
	src Source
	// Sampling is the task's sampling with Adapter set to the loaded
	// adapter ("" for the base model).
	Sampling Sampling
	// Version is the policy_version of its rows: the identity, with
	// "+<adapter>" when an adapter is loaded. A sample's own
	// PolicyVersion wins (TrajectoryRow).
	Version string
}

// Failed returns err, first forgetting the checkpoint's adapter when err
// says the policy no longer holds it (ErrAdapterNotLoaded: a server that
// restarted), so that the task's next attempt loads it again.
func (c *Checkpoint) Failed(err error) error {
	if errors.Is(err, ErrAdapterNotLoaded) && c.Sampling.Adapter != "" {
		c.src.Adapters.Forget(c.Sampling.Adapter)
	}
	return err
}

// Sampler is the sampler column of the checkpoint's rows: the sampling's
// JSON without its adapter, which the policy_version names instead. It
// fails on what JSON cannot hold (a NaN temperature): a fault of the
// configuration, not worth another attempt.
func (c *Checkpoint) Sampler() (string, error) {
	s := c.Sampling
	s.Adapter = ""
	return s.JSON()
}

// RowsOptions tune Source.Rows.
type RowsOptions struct {
	// Sampling is the task's sampling; its Adapter is set from the
	// policy input.
	Sampling Sampling
	// Seed is the task seed every prompt's request is seeded from
	// (PromptRequest), so a prompt samples the same way whatever batch it
	// lands in.
	Seed uint64
	// Batch is how many prompts go to the policy in one Generate call
	// (default DefaultBatch).
	Batch int
	// Row places the samples in the loop (group ids, staleness).
	Row RowParams
}

// Rows is a generate task's whole sampling: it makes a Checkpoint of the
// policy input dir ("" for the base model), samples Sampling.N
// completions of every prompt, Batch prompts per Generate call, and
// returns the trajectories rows in (prompt, sample index) order. It
// fails when the policy answers a batch with the wrong number of results
// or samples, and when no sample was served (NoneServed); a Generate
// error goes through Checkpoint.Failed. Errors that match ErrAdapterInput
// cannot be fixed by retrying. The caller names the iteration or
// checkpoint in its errors, and has rejected sampling that JSON cannot
// hold (Sampling.JSON) when it built the task.
func (src Source) Rows(ctx context.Context, dir string, prompts []tables.Prompt, o RowsOptions) ([]tables.Trajectory, error) {
	c, err := src.Checkpoint(ctx, dir, o.Sampling)
	if err != nil {
		return nil, err
	}
	sampler, err := c.Sampler()
	if err != nil {
		return nil, err
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	n := c.Sampling.Samples()
	rows := make([]tables.Trajectory, 0, len(prompts)*n)
	for start := 0; start < len(prompts); start += o.Batch {
		batch := prompts[start:min(start+o.Batch, len(prompts))]
		reqs := make([]Request, len(batch))
		for i, pr := range batch {
			reqs[i] = PromptRequest(pr, o.Seed)
		}
		out, err := src.Policy.Generate(ctx, reqs, c.Sampling)
		if err != nil {
			return nil, c.Failed(err)
		}
		if len(out) != len(reqs) {
			return nil, fmt.Errorf("the policy returned %d results for %d prompts", len(out), len(reqs))
		}
		for i, samples := range out {
			if len(samples) != n {
				return nil, fmt.Errorf("the policy returned %d samples for prompt %q, want %d", len(samples), reqs[i].ID, n)
			}
			for j, smp := range samples {
				rows = append(rows, TrajectoryRow(smp, reqs[i], j, o.Row, c.Version, sampler))
			}
		}
	}
	if err := NoneServed(rows); err != nil {
		return nil, err
	}
	return rows, nil
}
