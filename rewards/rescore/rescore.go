package rescore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts"
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
	Logger  zerolog.Logger
	OnEvent func(pipeline.Event)
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
		return rep, fmt.Errorf("rescore --from %s: %w: no iterations/NNNNNN/trajectories.parquet at %s", opts.From, artifacts.ErrNotFound, from.ID[:12])
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
	run, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: rep.Branch, Branch: rep.Branch, From: from.ID, NoCache: opts.NoCache, Logger: opts.Logger, OnEvent: opts.OnEvent})
	if err != nil {
		return rep, err
	}
	defer run.Close()
	task := rewards.Task(opts.Reward)
	it := run.Iteration(0)
	it.Message = fmt.Sprintf("rescore %d iterations of %s (%s) with reward spec %s", len(iters), opts.From, from.ID[:12], strings.TrimPrefix(digest, "sha256:")[:12])
	var nodes []*pipeline.Node
	for _, n := range iters {
		dir := iterDir(n)
		in := map[string]pipeline.Artifact{"trajectories": pipeline.StoreArtifact(from.ID, dir+"/trajectories.parquet")}
		if _, err := st.StatObject(ctx, from.ID, dir+"/prompts.parquet"); err == nil {
			in["prompts"] = pipeline.StoreArtifact(from.ID, dir+"/prompts.parquet")
		}
		node := it.Go(ctx, task, pipeline.Call{Name: "rescore-" + iterName(n), Dir: dir, Inputs: in, Params: map[string]string{"spec": digest}})
		nodes = append(nodes, node)
		// An iteration that had advantages gets them recomputed from the
		// new rewards, so training on this branch would see the new reward.
		if _, err := st.StatObject(ctx, from.ID, dir+"/advantages.parquet"); err == nil {
			it.Go(ctx, advantages.Task(), pipeline.Call{Name: "advantages-" + iterName(n), Dir: dir,
				Inputs: map[string]pipeline.Artifact{"rewards": node.Output(pipeline.OutRewards)}})
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
		dir := iterDir(n)
		if rows, err := readRewards(ctx, st, from.ID, dir+"/rewards.parquet"); err == nil {
			old = append(old, tables.IterationRewards{Iteration: n, Rows: rows})
		} else if !errors.Is(err, artifacts.ErrNotFound) {
			return rep, err
		}
		rows, err := readRewards(ctx, st, rep.Branch, dir+"/rewards.parquet")
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
	if _, err := st.PutObject(ctx, rep.Branch, tables.RescoreReportPath, bytes.NewReader(append(b, '\n')), &artifacts.PutOptions{ContentType: "application/json"}); err != nil {
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

func iterName(n int) string { return fmt.Sprintf("%06d", n) }
func iterDir(n int) string  { return "iterations/" + iterName(n) }

// iterations lists the iteration numbers at ref that hold trajectories.
func iterations(ctx context.Context, st artifacts.Store, ref string) ([]int, error) {
	var out []int
	for e, err := range st.ListObjects(ctx, ref, &artifacts.ListOptions{Prefix: "iterations/", Delimiter: "/"}) {
		if err != nil {
			return nil, err
		}
		if !e.CommonPrefix {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(e.Path, "iterations/"), "/")
		n, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if _, err := st.StatObject(ctx, ref, e.Path+"trajectories.parquet"); err == nil {
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

func readRewards(ctx context.Context, st artifacts.Store, ref, path string) ([]tables.Reward, error) {
	rc, info, err := st.GetObject(ctx, ref, path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, err
	}
	return tables.Read(bytes.NewReader(b), info.Size, ref+":"+path, tables.Rewards)
}
