package driver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
)

// EvalOptions are how Evaluate evaluates a run's checkpoints.
type EvalOptions struct {
	// Name is the run ("" is the config's run:).
	Name string
	// Checkpoints are the iterations whose adapters are evaluated; 0 is
	// the starting policy (the base model or the initial policy).
	Checkpoints []int
	// OnEvent, when set, is called with each of the engine's events.
	OnEvent func(pipeline.Event)
}

// EvalSummary is what an evaluation did.
type EvalSummary struct {
	Run         string
	Set         string // the eval set's name ("heldout")
	Commit      string // the commit that holds the evaluations
	Checkpoints []int
	Cached, Ran int // task calls that were cache hits, and that ran
}

// Evaluate evaluates checkpoints of a finished (or running) run with the
// config's eval section, as `rlpipe eval` does: each checkpoint's eval
// set is sampled and scored under evals/NNNNNN/<set>/ on the run branch,
// and the results are committed there. A checkpoint evaluated before with
// the same settings is a cache hit; an evaluation that changes nothing
// commits nothing and returns the branch's head.
func Evaluate(ctx context.Context, st artifacts.Store, cfg *config.Config, o EvalOptions) (EvalSummary, error) {
	name := o.Name
	if name == "" {
		name = cfg.Run
	}
	out := EvalSummary{Run: name, Checkpoints: o.Checkpoints}
	if cfg.Eval == nil {
		return out, fmt.Errorf("%w: eval: %s has no eval section", pipeline.ErrConfig, cfg.File())
	}
	branch := runs.Branch(name)
	plan, err := cfg.Plan(ctx)
	if err != nil {
		return out, err
	}
	defer plan.Close()
	stats := &tally{}
	plan.Run.Name = name
	plan.Run.OnEvent = func(e pipeline.Event) {
		stats.event(e)
		if o.OnEvent != nil {
			o.OnEvent(e)
		}
	}
	run, err := pipeline.Open(ctx, st, plan.Run)
	if err != nil {
		return out, withOp(err, "eval", name)
	}
	defer run.Close()
	gen, score, set, ok := pipeline.EvalTasks(plan.Stages.Steps)
	if !ok {
		return out, fmt.Errorf("%w: eval: the plan of %s has no eval steps", pipeline.ErrConfig, cfg.File())
	}
	out.Set = cfg.Eval.Name
	if out.Set == "" {
		out.Set = "heldout"
	}
	for _, c := range o.Checkpoints {
		it := run.Iteration(c)
		var adapter *pipeline.Artifact
		if c > 0 {
			a := pipeline.StoreDir(branch, runs.AdapterPath(c))
			adapter = &a
		} else if plan.Loop.InitialPolicy != nil {
			adapter = plan.Loop.InitialPolicy
		}
		pipeline.Evaluate(ctx, it, gen, score, set, adapter, c, out.Set, "")
		if err := it.Wait(ctx); err != nil {
			return out, fmt.Errorf("eval %s: checkpoint %d: %w", name, c, err)
		}
	}
	cps := make([]string, len(o.Checkpoints))
	for i, c := range o.Checkpoints {
		cps[i] = strconv.Itoa(c)
	}
	msg := fmt.Sprintf("eval: %s on %s, checkpoints %s", name, out.Set, strings.Join(cps, ","))
	commit, err := st.Commit(ctx, branch, msg, &artifacts.CommitOptions{Metadata: map[string]string{runs.MetaRun: name, runs.MetaEval: out.Set}})
	if errors.Is(err, artifacts.ErrNoChanges) {
		b, gerr := st.GetBranch(ctx, branch)
		if gerr != nil {
			return out, withOp(gerr, "eval", name)
		}
		commit, err = artifacts.Commit{ID: b.CommitID}, nil
	}
	if err != nil {
		return out, fmt.Errorf("eval %s: commit: %w", name, err)
	}
	stats.mu.Lock()
	out.Commit, out.Cached, out.Ran = commit.ID, stats.cached, stats.tasks-stats.cached
	stats.mu.Unlock()
	return out, nil
}
