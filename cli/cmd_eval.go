package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/evaluators"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/driver"
)

type evalOptions struct {
	file        string
	run         string
	checkpoints string
	n           int
	k           string
	overrides   overrideOptions
}

func (o *evalOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.file, "file", "f", "pipeline.yaml", "the run's pipeline config: its policy, reward spec and eval section")
	fs.StringVar(&o.run, "run", "", "the run to evaluate (default: the config's run)")
	fs.StringVar(&o.checkpoints, "checkpoints", "all", `"all" (the starting policy and every iteration's adapter), or iterations "0,10,20" (0: the starting policy)`)
	fs.IntVar(&o.n, "n", 0, "samples per problem (default: the config's eval.n)")
	fs.StringVar(&o.k, "k", "", `the k of the metrics, e.g. "1,4,8,16" (default: the config's eval.k)`)
	o.overrides.AddFlags(fs)
}

func newEvalCommand(g *rootOptions) *cobra.Command {
	return withOptions(&cobra.Command{
		Use:   "eval -f pipeline.yaml [key.path=value …] [--run RUN] [--checkpoints all|N,M] [--n 16] [--k 1,4,8,16]",
		Short: "evaluate a run's checkpoints on its held-out set, reusing what is cached",
		Long: `Evaluate checkpoints of a run the way the loop does: n samples per problem of the
config's eval set with seeds that do not depend on the checkpoint, scored with
the run's reward spec, summarised as avg@k, pass@k, pass^k and maj@k (and the
exact expected pass@1 for the embedded model), written to
evals/NNNNNN/<set>/ on the run branch and committed.

Generations are cached by (adapter digest, eval set, sampling, seed), scores by
(generations, reward spec, k): back-filling every checkpoint after a run only
samples what is missing, and a new --k or reward spec rescores stored
generations without sampling again.`,
		Example: `  rlpipe eval -f examples/arithmetic/pipeline.yaml --checkpoints all
  rlpipe eval -f pipeline.yaml --run exp1 --checkpoints 0,30,60 --n 32 --k 1,8,32`,
		Args: overrideArgs,
	}, func(cmd *cobra.Command, o evalOptions, args []string) error {
		cfg, err := o.overrides.load(o.file, args)
		if err != nil {
			return failure(err)
		}
		if cfg.Eval == nil {
			return failure(fmt.Errorf("eval: %s has no eval section (set, n, max_tokens): add one, see docs/PIPELINE.md", o.file))
		}
		if o.n > 0 {
			cfg.Eval.N = o.n
		}
		if o.k != "" {
			ks, err := parseInts(o.k)
			if err != nil {
				return usagef("eval: --k %q: %v", o.k, err)
			}
			cfg.Eval.K = ks
		}
		for _, k := range cfg.Eval.K {
			if k > cfg.Eval.N {
				return failure(fmt.Errorf("eval: k=%d but only n=%d samples per problem: sample at least k (--n %d, ideally %d)", k, cfg.Eval.N, k, 2*k))
			}
		}
		cfg.Eval.Every = max(cfg.Eval.Every, 1)
		return g.withStore(cmd, func(ctx context.Context, st artifacts.Store) error {
			return evalFunc(ctx, st, cfg, o, g.printer(cmd), g.env.stderr)
		})
	})
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%q is not a non-negative integer", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// evalRunOut is the JSON shape of `rlpipe eval`.
type evalRunOut struct {
	Run         string    `json:"run"`
	Commit      string    `json:"commit"`
	Checkpoints []int     `json:"checkpoints"`
	Cached      int       `json:"cached"` // task calls answered from the cache
	Ran         int       `json:"ran"`
	Evals       []evalOut `json:"evals"`
	Seconds     float64   `json:"seconds"`
}

// evalFunc evaluates the checkpoints; warnings go to stderr, so that
// -o json output stays one JSON document.
func evalFunc(ctx context.Context, st artifacts.Store, cfg *config.Config, o evalOptions, p printer, stderr io.Writer) error {
	start := time.Now()
	name := cfg.Run
	if o.run != "" {
		name = o.run
	}
	if name == "" {
		return usagef("eval: name the run with --run NAME or with run: in %s", cfg.File())
	}
	branch := runs.Branch(name)
	if _, err := st.GetBranch(ctx, branch); errors.Is(err, artifacts.ErrNotFound) {
		return explain(err, "eval: no run %q in this store: `rlpipe status` lists the runs", name)
	} else if err != nil {
		return withOp(err, "eval %s", name)
	}
	cps, err := checkpointsOf(ctx, st, branch, o.checkpoints)
	if err != nil {
		return failure(err)
	}
	if err := warnOverlap(ctx, st, cfg, stderr); err != nil {
		return err
	}
	sum, err := driver.Evaluate(ctx, st, cfg, driver.EvalOptions{Name: name, Checkpoints: cps})
	if err != nil {
		return failure(err)
	}
	set := sum.Set
	evals, err := readEvals(ctx, st, sum.Commit)
	if err != nil {
		return err
	}
	want := map[int]bool{}
	for _, c := range cps {
		want[c] = true
	}
	out := evalRunOut{Run: name, Commit: sum.Commit, Checkpoints: cps, Evals: []evalOut{}, Seconds: time.Since(start).Round(time.Millisecond).Seconds(),
		Cached: sum.Cached, Ran: sum.Ran}
	for _, e := range evals {
		if want[e.Iteration] && e.Set == set {
			out.Evals = append(out.Evals, e)
		}
	}
	if p.json {
		return p.JSON(out)
	}
	var sb strings.Builder
	cols := evalColumns(out.Evals)
	t := newTable(append([]string{"CHECKPOINT", "PROBLEMS", "N"}, cols...)...)
	for i := 1; i < 3+len(cols); i++ {
		t.alignRight(i)
	}
	for _, e := range out.Evals {
		row := []string{e.Checkpoint, strconv.Itoa(e.Problems), strconv.Itoa(e.N)}
		for _, c := range cols {
			row = append(row, strconv.FormatFloat(e.Metrics[c], 'f', 4, 64))
		}
		t.add(row...)
	}
	_ = t.write(&sb)
	fmt.Fprintf(&sb, "evaluated %d checkpoints of %s on %s (%d task calls cached, %d ran) as %s in %s\n",
		len(cps), name, set, out.Cached, out.Ran, shortID(sum.Commit), time.Since(start).Round(100*time.Millisecond))
	return p.Printf("%s", sb.String())
}

// checkpointsOf resolves --checkpoints against the run: 0 is the starting
// policy; N must be an iteration whose adapter the branch holds.
func checkpointsOf(ctx context.Context, st artifacts.Store, branch, spec string) ([]int, error) {
	have := map[int]bool{0: true}
	for e, err := range st.ListObjects(ctx, branch, &artifacts.ListOptions{Prefix: runs.IterationsPrefix}) {
		if err != nil {
			return nil, err
		}
		if n, rest, ok := runs.ParseIterationPath(e.Path); ok && rest == runs.AdapterDir+"/"+runs.AdapterConfigFile {
			have[n] = true
		}
	}
	var out []int
	if spec == "all" {
		for n := range have {
			out = append(out, n)
		}
	} else {
		ns, err := parseInts(spec)
		if err != nil {
			return nil, fmt.Errorf("eval: --checkpoints %q: %v", spec, err)
		}
		for _, n := range ns {
			if !have[n] {
				return nil, fmt.Errorf("eval: checkpoint %d of %s is not an adapter (no %s:%s/%s); `rlpipe status` lists the iterations",
					n, branch, branch, runs.AdapterPath(n), runs.AdapterConfigFile)
			}
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out, nil
}

// warnOverlap prints a loud warning when the eval set shares problems with
// the training dataset: held-out numbers would then measure memory. A
// problem is shared when a training prompt has its prompt_id or its
// prompt text (whitespace normalized: the same questions imported twice
// get different ids). It reads three columns of each table, once.
func warnOverlap(ctx context.Context, st artifacts.Store, cfg *config.Config, w io.Writer) error {
	open := func(art string) (*tables.Reader[tables.Prompt], error) {
		ref, path, err := artifacts.SplitArtifact(art)
		if err != nil {
			return nil, err
		}
		return openPrompts(ctx, st, ref, path, evaluators.OverlapColumns)
	}
	train, err := open(cfg.Dataset)
	if err != nil {
		return nil // the run itself reports a missing dataset
	}
	defer train.Close()
	eval, err := open(cfg.Eval.Set)
	if err != nil {
		return failure(fmt.Errorf("eval: eval set %s: %w", cfg.Eval.Set, err))
	}
	defer eval.Close()
	ov, err := evaluators.CompareSets(train.Rows(ctx), eval.Rows(ctx))
	if err != nil {
		return failure(fmt.Errorf("eval: compare the eval set %s with the training prompts %s: %w", cfg.Eval.Set, cfg.Dataset, err))
	}
	if ov.Shared == 0 {
		return nil
	}
	_, err = io.WriteString(w, overlapWarning(ov, cfg.Eval.Set, cfg.Dataset))
	return err
}

// overlapWarning says how many eval problems the training set has, how
// many under other ids, and names a few.
func overlapWarning(ov evaluators.Overlap, set, dataset string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "WARNING: %d of %d eval problems (%s) are also training prompts (%s)", ov.Shared, ov.EvalRows, set, dataset)
	if other := ov.Shared - ov.SameID; other > 0 {
		fmt.Fprintf(&b, ", %d of them under another prompt_id with the same prompt text", other)
	}
	b.WriteString(": held-out figures will overstate what the policy learned\n  shared: ")
	for i, ex := range ov.Examples {
		if i > 0 {
			b.WriteString("; ")
		}
		switch {
		case ex.EvalID != ex.TrainID:
			fmt.Fprintf(&b, "eval %q = train %q (same text)", ex.EvalID, ex.TrainID)
		case ex.SameText:
			fmt.Fprintf(&b, "%q (same prompt_id and text)", ex.EvalID)
		default:
			fmt.Fprintf(&b, "%q (same prompt_id, other text or task)", ex.EvalID)
		}
	}
	if more := ov.Shared - len(ov.Examples); more > 0 {
		fmt.Fprintf(&b, "; and %d more", more)
	}
	b.WriteString("\n  remove them from the eval set (or from the training set) to measure held-out problems\n")
	return b.String()
}
