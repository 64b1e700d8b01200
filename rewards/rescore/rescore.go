package rescore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/rewards"
)

// Options configure a rescoring.
type Options struct {
	// From is the ref whose iterations are rescored (a run branch, a
	// commit, a tag).
	From string
	// Branch receives the new rewards (default rescore-<spec digest>).
	Branch string
	// Reward is the new reward, compiled: runners.Compile(spec) gives a
	// spec its verifiers and judges. Every iteration is scored with this
	// one program (rewards.Task), its verifiers and judges memoized
	// through each task call's trace, so a judge call made before is
	// replayed, not paid again.
	Reward *rewards.Program
	// TopK bounds the listed changes (default 10).
	TopK int
	// NoCache rescores even iterations already rescored with this spec.
	NoCache bool
	// Estimators are the advantage estimators a run's recorded advantages
	// step may name (the registry's, kind.Registry.Estimators); GRPO's
	// steps name none.
	Estimators advantages.Estimators
	Logger     zerolog.Logger
	OnEvent    func(pipeline.Event)
}

// Run branches the store at opts.From, recomputes the rewards (and, where
// the iteration had them, the GRPO advantages) of every iteration found
// there from its stored trajectories (and prompts), commits them with the
// comparison report, and returns the report.
// Nothing is regenerated; each iteration is a cached, memoized task of the
// engine, so a rescoring interrupted halfway resumes where it stopped.
func Run(ctx context.Context, st artifacts.Store, opts Options) (tables.RescoreReport, error) {
	if opts.Reward == nil {
		return tables.RescoreReport{}, fmt.Errorf("rescore: %w: no reward program (compile the spec with runners.Compile)", artifacts.ErrInvalid)
	}
	digest := opts.Reward.Digest()
	from, err := st.ResolveRef(ctx, opts.From)
	if err != nil {
		return tables.RescoreReport{}, fmt.Errorf("rescore --from %s: %w", opts.From, err)
	}
	rep := tables.RescoreReport{From: opts.From, FromCommit: from.ID, Branch: opts.Branch, SpecDigest: digest}
	if rep.Branch == "" {
		rep.Branch = "rescore-" + strings.TrimPrefix(digest, "sha256:")[:12]
	}
	if opts.TopK <= 0 {
		opts.TopK = 10
	}
	iters, err := iterations(ctx, st, from.ID)
	if err != nil {
		return rep, err
	}
	if len(iters) == 0 {
		return rep, fmt.Errorf("rescore --from %s: %w: no %s at %s", opts.From, artifacts.ErrNotFound, runs.IterationPattern(runs.TrajectoriesFile), from.ID[:12])
	}
	if b, err := st.GetBranch(ctx, rep.Branch); err == nil {
		base, err := st.ResolveRef(ctx, rep.Branch+"@")
		if err != nil {
			return rep, err
		}
		if b.CommitID != from.ID && !isDescendant(ctx, st, base.ID, from.ID) {
			return rep, fmt.Errorf("rescore: %w: branch %s exists and does not come from %s (pick another --branch, or `rlpipe branch delete %s`)", artifacts.ErrBranchExists, rep.Branch, opts.From, rep.Branch)
		}
	}
	// Every table is checked before any task starts, so that a refusal
	// leaves nothing running.
	advs := make([]*pipeline.Task, len(iters))
	envs := map[string]pipeline.Settings{}
	for i, n := range iters {
		if advs[i], err = advantagesTask(ctx, st, from.ID, n, opts.Estimators); err != nil {
			return rep, err
		}
		if advs[i] != nil && advs[i].Env != "" {
			envs[advs[i].Env] = pipeline.Settings{}
		}
	}
	run, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: rep.Branch, Branch: rep.Branch, From: from.ID, Envs: envs,
		NoCache: opts.NoCache, Logger: opts.Logger, OnEvent: opts.OnEvent})
	if err != nil {
		return rep, err
	}
	defer run.Close()
	task := rewards.Task(opts.Reward)
	it := run.Iteration(0)
	it.Message = fmt.Sprintf("rescore %d iterations of %s (%s) with reward spec %s", len(iters), opts.From, from.ID[:12], strings.TrimPrefix(digest, "sha256:")[:12])
	var nodes []*pipeline.Node
	for i, n := range iters {
		trajs := pipeline.StoreArtifact(from.ID, runs.IterationPath(n, runs.TrajectoriesFile))
		in := map[string]pipeline.Artifact{pipeline.OutTrajectories: trajs}
		if _, err := st.StatObject(ctx, from.ID, runs.IterationPath(n, runs.PromptsFile)); err == nil {
			in[pipeline.OutPrompts] = pipeline.StoreArtifact(from.ID, runs.IterationPath(n, runs.PromptsFile))
		}
		dir := runs.IterationDir(n)
		node := it.Go(ctx, task, pipeline.Call{Name: fmt.Sprintf("rescore-%06d", n), Dir: dir, Inputs: in, Params: map[string]string{"spec": digest}})
		nodes = append(nodes, node)
		// An iteration that had advantages gets them recomputed from the
		// new rewards, with the options the run computed them with, so
		// training on this branch would see the new reward and nothing else.
		if adv := advs[i]; adv != nil {
			it.Go(ctx, adv, pipeline.Call{Name: fmt.Sprintf("advantages-%06d", n), Dir: dir,
				Inputs: map[string]pipeline.Artifact{pipeline.OutTrajectories: trajs, pipeline.OutRewards: node.Output(pipeline.OutRewards)}})
		}
	}
	if err := it.Wait(ctx); err != nil {
		return rep, err
	}
	var old, new []tables.IterationRewards
	for i, n := range iters {
		if nodes[i].Cached() {
			rep.Cached++
		}
		path := runs.IterationPath(n, runs.RewardsFile)
		if rows, err := readTable(ctx, st, from.ID, path, tables.Rewards); err == nil {
			old = append(old, tables.IterationRewards{Iteration: n, Rows: rows})
		} else if !errors.Is(err, artifacts.ErrNotFound) {
			return rep, err
		}
		rows, err := readTable(ctx, st, rep.Branch, path, tables.Rewards)
		if err != nil {
			return rep, err
		}
		new = append(new, tables.IterationRewards{Iteration: n, Rows: rows})
	}
	rep.Iterations = iters
	rep.Comparison = tables.CompareRewards(old, new, opts.TopK)
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return rep, fmt.Errorf("rescore: encode report: %w", err)
	}
	if _, err := st.PutObject(ctx, rep.Branch, runs.RescoreReportPath, bytes.NewReader(append(b, '\n')), &artifacts.PutOptions{ContentType: "application/json"}); err != nil {
		return rep, fmt.Errorf("rescore: write report: %w", err)
	}
	c, err := it.Commit(ctx, nil, map[string]string{"rlpipe.rescore-from": from.ID, "rlpipe.spec-digest": digest})
	if errors.Is(err, artifacts.ErrNoChanges) {
		head, herr := st.ResolveRef(ctx, rep.Branch)
		if herr != nil {
			return rep, herr
		}
		rep.Commit = head.ID
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	rep.Commit = c.ID
	return rep, nil
}

// advantagesTask is the task that recomputes iteration n's advantages at
// ref as the run computed them: the advantages step with the options its
// recorded task version names (advantages.ParseVersion), or the older
// rewards-only task. nil when the iteration has no advantages table.
func advantagesTask(ctx context.Context, st artifacts.Store, ref string, n int, ests advantages.Estimators) (*pipeline.Task, error) {
	path := runs.IterationPath(n, runs.AdvantagesFile)
	info, err := st.StatObject(ctx, ref, path)
	if errors.Is(err, artifacts.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rescore: %s:%s: %w", ref, path, err)
	}
	v := info.Metadata[artifacts.MetaTaskVersion]
	if legacy := advantages.Task(); v == legacy.Version {
		return legacy, nil
	}
	o, err := advantages.ParseVersion(v, ests...)
	if errors.Is(err, advantages.ErrUnknownEstimator) {
		return nil, fmt.Errorf("rescore: %s:%s: %w; rescore with a program that registers it", ref[:min(12, len(ref))], path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("rescore: %s:%s was not written by the advantages step (%s %q): rescoring cannot recompute it as the run did; rescore a ref whose advantages the loop wrote, or delete the table on a branch first: %w",
			ref[:min(12, len(ref))], path, artifacts.MetaTaskVersion, v, artifacts.ErrInvalid)
	}
	return advantages.TrainTask(o), nil
}

// iterations lists the iteration numbers at ref that hold trajectories.
func iterations(ctx context.Context, st artifacts.Store, ref string) ([]int, error) {
	var out []int
	for e, err := range st.ListObjects(ctx, ref, &artifacts.ListOptions{Prefix: runs.IterationsPrefix}) {
		if err != nil {
			return nil, err
		}
		if n, ok := runs.InIteration(e.Path, runs.TrajectoriesFile); ok {
			out = append(out, n)
		}
	}
	return out, nil
}

// isDescendant reports whether commit a has b as an ancestor (first parents).
func isDescendant(ctx context.Context, st artifacts.Store, a, b string) bool {
	for c, err := range st.Log(ctx, a, &artifacts.LogOptions{FirstParent: true}) {
		if err != nil {
			return false
		}
		if c.ID == b {
			return true
		}
	}
	return false
}

// readTable reads the table t at ref:path.
func readTable[T any](ctx context.Context, st artifacts.Store, ref, path string, t *tables.Table[T]) ([]T, error) {
	rc, info, err := st.GetObject(ctx, ref, path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, err
	}
	return tables.Read(bytes.NewReader(b), info.Size, ref+":"+path, t)
}
