package rescore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
)

// Errors of Advantages, each an artifacts error a caller can test for.
var (
	// ErrNotRun: the ref holds no run (no run/state.json).
	ErrNotRun = artifacts.NamedError("not a run", artifacts.ErrInvalid)
	// ErrNoIteration: the run has no such iteration, or it has no
	// advantages table to compare with.
	ErrNoIteration = artifacts.NamedError("no such iteration", artifacts.ErrNotFound)
	// ErrGroupTooSmall: every group of the iteration holds fewer samples
	// than the estimator needs (RLOO on groups of one).
	ErrGroupTooSmall = artifacts.NamedError("groups too small for the estimator", artifacts.ErrInvalid)
	// ErrNonfinite: a stored reward says ok but its total is NaN or
	// infinite. It is bad data, not a bad argument.
	ErrNonfinite = errors.New("non-finite reward")
)

// Std values of AdvantagesOptions.Std.
const (
	StdSample     = "sample"
	StdPopulation = "population"
)

// AdvantagesOptions configure a recomputation of one iteration's
// advantages under another estimator.
type AdvantagesOptions struct {
	// From is a run's ref (runs-arith, runs-arith~2).
	From string
	// Iteration is the iteration recomputed; 0 is the run's last.
	Iteration int
	// Estimator names the estimator, one of Estimators.
	Estimator string
	// Std is StdSample or StdPopulation; "" keeps the run's.
	Std string
	// Branch receives the advantages (default <run>-<estimator>-<iteration>,
	// e.g. arith-rloo-000004); it may not exist yet.
	Branch     string
	Estimators advantages.Estimators
	Logger     zerolog.Logger
	OnEvent    func(pipeline.Event)
}

// AdvantagesReport is what Advantages did and found.
type AdvantagesReport struct {
	From       string `json:"from"`
	FromCommit string `json:"from_commit"`
	Iteration  int    `json:"iteration"`
	// StoredVersion and Version are the advantages task versions of the
	// stored table and of the new one (they name the options).
	StoredVersion string                     `json:"stored_version"`
	Version       string                     `json:"version"`
	Estimator     string                     `json:"estimator"`
	Std           string                     `json:"std"`
	Branch        string                     `json:"branch"`
	Commit        string                     `json:"commit"`
	Comparison    tables.AdvantageComparison `json:"comparison"`
}

// Advantages recomputes iteration opts.Iteration's advantages of the run
// at opts.From under another estimator, from its stored trajectories and
// rewards (nothing is generated, scored or trained), writes them as the
// advantages step writes them (iterations/NNNNNN/advantages.parquet, the
// run's other options kept) on a new branch, commits, and compares them
// with the stored ones.
func Advantages(ctx context.Context, st artifacts.Store, opts AdvantagesOptions) (AdvantagesReport, error) {
	rep := AdvantagesReport{From: opts.From, Estimator: opts.Estimator, Branch: opts.Branch}
	est, err := opts.Estimators.Lookup(opts.Estimator)
	if err != nil {
		return rep, fmt.Errorf("rescore --advantages: %w", err)
	}
	if advantages.NeedsCritic(est) {
		return rep, fmt.Errorf("rescore --advantages %s: %w: its advantages are per token, from the trainer's critic, which rescoring does not run; a PPO run keeps them in each iteration's %s", est.Name(), artifacts.ErrInvalid, runs.ValuesFile)
	}
	if opts.Std != "" && opts.Std != StdSample && opts.Std != StdPopulation {
		return rep, fmt.Errorf("rescore --std %q: %w: use %s or %s", opts.Std, artifacts.ErrInvalid, StdSample, StdPopulation)
	}
	from, err := st.ResolveRef(ctx, opts.From)
	if err != nil {
		return rep, fmt.Errorf("rescore --from %s: %w", opts.From, err)
	}
	rep.FromCommit = from.ID
	if s, err := runs.ReadState(ctx, st, from.ID); err != nil {
		return rep, fmt.Errorf("rescore --from %s: %w", opts.From, err)
	} else if s == nil {
		return rep, fmt.Errorf("rescore --from %s: %w: it holds no %s; name a run's branch (runs-NAME, as `rlpipe status` lists them)", opts.From, ErrNotRun, runs.StatePath)
	}
	iters, err := iterations(ctx, st, from.ID)
	if err != nil {
		return rep, fmt.Errorf("rescore --from %s: list iterations: %w", opts.From, err)
	}
	if len(iters) == 0 {
		return rep, fmt.Errorf("rescore --from %s: %w: the run has no iteration yet", opts.From, ErrNoIteration)
	}
	n := opts.Iteration
	if n == 0 {
		n = iters[len(iters)-1]
	}
	if !slices.Contains(iters, n) {
		return rep, fmt.Errorf("rescore --from %s --iteration %d: %w: the run's iterations are %d..%d (its last is %d)", opts.From, n, ErrNoIteration, iters[0], iters[len(iters)-1], iters[len(iters)-1])
	}
	rep.Iteration = n
	if rep.Branch == "" {
		rep.Branch = fmt.Sprintf("%s-%s-%06d", runName(opts.From), est.Name(), n)
	}
	if _, ok := runs.RunOf(rep.Branch); ok {
		return rep, fmt.Errorf("rescore --branch %s: %w: a branch named %s… is a run's; pick another --branch", rep.Branch, artifacts.ErrInvalid, runs.BranchPrefix)
	}
	if _, err := st.GetBranch(ctx, rep.Branch); err == nil {
		return rep, fmt.Errorf("rescore --advantages: %w: %s; pick another --branch NAME, or `rlpipe branch delete %s`", artifacts.ErrBranchExists, rep.Branch, rep.Branch)
	} else if !errors.Is(err, artifacts.ErrNotFound) {
		return rep, err
	}
	advPath := runs.IterationPath(n, runs.AdvantagesFile)
	info, err := st.StatObject(ctx, from.ID, advPath)
	if errors.Is(err, artifacts.ErrNotFound) {
		return rep, fmt.Errorf("rescore --from %s --iteration %d: %w: no %s (its trainer computes no advantages)", opts.From, n, ErrNoIteration, advPath)
	}
	if err != nil {
		return rep, err
	}
	rep.StoredVersion = info.Metadata[artifacts.MetaTaskVersion]
	o, err := advantages.ParseVersion(rep.StoredVersion, opts.Estimators...)
	if err != nil {
		return rep, fmt.Errorf("rescore --from %s: %s:%s: %w; only a table the advantages step wrote can be recomputed", opts.From, opts.From, advPath, err)
	}
	o.Estimator = est
	switch opts.Std {
	case StdSample:
		o.SampleStd = true
	case StdPopulation:
		o.SampleStd = false
	}
	rep.Std = StdPopulation
	if o.SampleStd {
		rep.Std = StdSample
	}
	rewPath := runs.IterationPath(n, runs.RewardsFile)
	rewards, err := readTable(ctx, st, from.ID, rewPath, tables.Rewards)
	if err != nil {
		return rep, fmt.Errorf("rescore --from %s: read %s: %w", opts.From, rewPath, err)
	}
	if err := checkRewards(rewards, est, opts.From, rewPath, n); err != nil {
		return rep, err
	}
	task := advantages.TrainTask(o)
	rep.Version = task.Version
	run, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: rep.Branch, Branch: rep.Branch, From: from.ID,
		Envs: map[string]pipeline.Settings{task.Env: {}}, Logger: opts.Logger, OnEvent: opts.OnEvent})
	if err != nil {
		return rep, err
	}
	defer run.Close()
	it := run.Iteration(0)
	it.Message = fmt.Sprintf("advantages of iteration %d of %s (%s) under %s, std %s", n, opts.From, from.ID[:12], est.Name(), rep.Std)
	it.Go(ctx, task, pipeline.Call{Name: fmt.Sprintf("advantages-%06d", n), Dir: runs.IterationDir(n),
		Inputs: map[string]pipeline.Artifact{
			pipeline.OutTrajectories: pipeline.StoreArtifact(from.ID, runs.IterationPath(n, runs.TrajectoriesFile)),
			pipeline.OutRewards:      pipeline.StoreArtifact(from.ID, rewPath)}})
	if err := it.Wait(ctx); err != nil {
		return rep, err
	}
	c, err := it.Commit(ctx, nil, map[string]string{"rlpipe.rescore-from": from.ID, "rlpipe.estimator": est.Name()})
	switch {
	case errors.Is(err, artifacts.ErrNoChanges):
		// The same options as the run's: the table is the stored one.
		head, herr := st.ResolveRef(ctx, rep.Branch)
		if herr != nil {
			return rep, herr
		}
		rep.Commit = head.ID
	case err != nil:
		return rep, err
	default:
		rep.Commit = c.ID
	}
	old, err := readTable(ctx, st, from.ID, advPath, tables.Advantages)
	if err != nil {
		return rep, err
	}
	new, err := readTable(ctx, st, rep.Commit, advPath, tables.Advantages)
	if err != nil {
		return rep, err
	}
	rep.Comparison = tables.CompareAdvantages(old, new)
	return rep, nil
}

// checkRewards refuses rewards no advantage can be computed from: a
// total that says ok but is not finite, or groups all smaller than est
// needs.
func checkRewards(rows []tables.Reward, est advantages.Estimator, from, path string, n int) error {
	size := map[string]int{}
	largest := 0
	for i, r := range rows {
		if r.Outcome() == tables.RewardNonfinite {
			return fmt.Errorf("rescore --from %s: %s:%s row %d (prompt %s, sample %d): %w: total is %v; fix the reward and rescore it first (rlpipe rescore --reward)",
				from, from, path, i, r.PromptID, r.SampleIndex, ErrNonfinite, r.Total)
		}
		size[r.PromptID]++
		largest = max(largest, size[r.PromptID])
	}
	if need := advantages.MinGroup(est); largest < need {
		return fmt.Errorf("rescore --from %s --iteration %d: %w: its groups hold %d sample per prompt and %s needs %d; sample more per prompt (the generate stage's sampling n: %d or more) or pick an estimator that needs no group (%s masks lone samples)",
			from, n, ErrGroupTooSmall, largest, est.Name(), need, need, advantages.GRPO.Name())
	}
	return nil
}

// runName is the run a ref names, for a branch name: runs-arith~2 is
// arith.
func runName(ref string) string {
	ref = strings.TrimPrefix(ref, runs.BranchPrefix)
	if i := strings.IndexAny(ref, "~^@:"); i >= 0 {
		ref = ref[:i]
	}
	return ref
}
