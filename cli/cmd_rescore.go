package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/rescore"
	"github.com/rlpipe/rlpipe/rewards/runners"
)

type rescoreOptions struct {
	from    string
	reward  string
	branch  string
	top     int
	noCache bool

	advantages string
	iteration  int
	std        string
}

func (o *rescoreOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.from, "from", "", "the ref whose iterations are rescored (a run branch such as runs-exp1, a commit, a tag)")
	fs.StringVar(&o.reward, "reward", "", "the new reward spec (YAML; see docs/REWARDS.md)")
	fs.StringVar(&o.branch, "branch", "", "branch for the new rewards (default: rescore-<spec digest>)")
	fs.IntVar(&o.top, "top", 10, "how many of the most changed samples to list")
	fs.BoolVar(&o.noCache, "no-cache", false, "rescore iterations already rescored with this spec")
	fs.StringVar(&o.advantages, "advantages", "", "instead of a reward: recompute one iteration's advantages under this estimator (grpo, rloo, dr_grpo, …)")
	fs.IntVar(&o.iteration, "iteration", 0, "with --advantages: the iteration (default the run's last)")
	fs.StringVar(&o.std, "std", "", "with --advantages: sample or population std (default the run's)")
}

func newRescoreCommand(g *rootOptions) *cobra.Command {
	return withOptions(&cobra.Command{
		Use:   "rescore --from REF (--reward SPEC.yaml | --advantages ESTIMATOR) [--branch NAME]",
		Short: "try a new reward or advantage estimator on stored rollouts, on a branch",
		Long: `Branch the store at REF and recompute every iteration's rewards from its
stored trajectories with a new reward spec. No rollout is regenerated, and
memoized judge calls are replayed, not paid again. The new rewards and a
comparison (reports/rescore.json) are committed on the branch; the command
prints the comparison: each component's distribution before and after, the
samples that moved most, rank agreement, and how many prompt groups gain or
lose reward variance. Compare artifacts with ` + "`rlpipe diff REF BRANCH`" + `.

With --advantages ESTIMATOR instead of --reward, the run's iteration
(--iteration, default the last) keeps its rewards: its advantages are
recomputed under the estimator (--std sample|population, other options as
the run had them) and committed on a new branch (default
<run>-<estimator>-<iteration>), and the command prints how they differ from
the stored ones: rank correlation, sign flips, mean |Δ| and the groups
masked under each.`,
		Example: `  rlpipe rescore --from runs-exp1 --reward new.yaml
  rlpipe rescore --from runs-exp1~3 --reward strict.yaml --branch try-strict -o json
  rlpipe rescore --from runs-arith --advantages rloo --iteration 3`,
		Args: exactArgs(),
	}, func(cmd *cobra.Command, o rescoreOptions, _ []string) error {
		if o.advantages != "" {
			if o.from == "" || o.reward != "" {
				return usagef("rescore --advantages needs --from REF and no --reward")
			}
			return g.withStore(cmd, func(ctx context.Context, st artifacts.Store) error {
				return rescoreAdvantagesFunc(ctx, st, o, g.printer(cmd))
			})
		}
		if o.from == "" || o.reward == "" {
			return usagef("rescore needs --from REF and --reward SPEC.yaml (or --advantages ESTIMATOR)")
		}
		spec, err := rewards.LoadSpec(o.reward)
		var prog *rewards.Program
		if err == nil {
			prog, err = runners.Compile(spec) // type errors before touching the store
		}
		if err != nil {
			return failure(err)
		}
		return g.withStore(cmd, func(ctx context.Context, st artifacts.Store) error {
			return rescoreFunc(ctx, st, o, prog, g.printer(cmd))
		})
	})
}

func rescoreFunc(ctx context.Context, st artifacts.Store, o rescoreOptions, prog *rewards.Program, p printer) error {
	rep, err := rescore.Run(ctx, st, rescore.Options{From: o.from, Branch: o.branch, Reward: prog, TopK: o.top, NoCache: o.noCache,
		Estimators: kinds.Registry().Estimators, Logger: *zerolog.Ctx(ctx)})
	if err != nil {
		return err
	}
	if p.json {
		return p.JSON(rep)
	}
	return writeRescoreReport(p.w, rep)
}

func rescoreAdvantagesFunc(ctx context.Context, st artifacts.Store, o rescoreOptions, p printer) error {
	rep, err := rescore.Advantages(ctx, st, rescore.AdvantagesOptions{From: o.from, Iteration: o.iteration, Estimator: o.advantages,
		Std: o.std, Branch: o.branch, Estimators: kinds.Registry().Estimators, Logger: *zerolog.Ctx(ctx)})
	if err != nil {
		return err
	}
	if p.json {
		return p.JSON(rep)
	}
	c := rep.Comparison
	fmt.Fprintf(p.w, "advantages of iteration %d of %s (%s) under %s, std %s, on branch %s: commit %s\n",
		rep.Iteration, rep.From, shortID(rep.FromCommit), rep.Estimator, rep.Std, rep.Branch, shortID(rep.Commit))
	fmt.Fprintf(p.w, "stored: %s\nnew:    %s\n\n", rep.StoredVersion, rep.Version)
	rho := "undefined (one side is constant)"
	if c.Spearman != nil {
		rho = fmt.Sprintf("%.4f", *c.Spearman)
	}
	t := newTable("FIGURE", "VALUE").alignRight(1)
	t.add("samples compared", fmt.Sprintf("%d of %d", c.Compared, c.Samples))
	t.add("rank correlation", rho)
	t.add("sign flips", fmt.Sprintf("%d (%.2f%%)", c.SignFlips, 100*c.SignFlipShare))
	t.add("mean |delta|", fmt.Sprintf("%.4f", c.MeanAbsDelta))
	t.add("groups masked, stored", fmt.Sprintf("%d of %d", c.GroupsMaskedOld, c.Groups))
	t.add("groups masked, new", fmt.Sprintf("%d of %d", c.GroupsMaskedNew, c.Groups))
	t.add("samples masked, stored", fmt.Sprint(c.MaskedOld))
	t.add("samples masked, new", fmt.Sprint(c.MaskedNew))
	if err := t.write(p.w); err != nil {
		return err
	}
	_, err = fmt.Fprintf(p.w, "\nsee the table: rlpipe diff %s %s --two-dot\n", rep.FromCommit[:12], rep.Branch)
	return err
}

func writeRescoreReport(w io.Writer, rep tables.RescoreReport) error {
	c := rep.Comparison
	fmt.Fprintf(w, "rescored %s (%s) with %s on branch %s: commit %s\n", rep.From, shortID(rep.FromCommit), "spec "+shortID(strings.TrimPrefix(rep.SpecDigest, "sha256:")), rep.Branch, shortID(rep.Commit))
	fmt.Fprintf(w, "%d iterations (%d already rescored), %s\n\n", len(rep.Iterations), rep.Cached, c)
	t := newTable("COMPONENT", "OLD MEAN", "NEW MEAN", "OLD STD", "NEW STD", "OLD MIN..MAX", "NEW MIN..MAX").alignRight(1, 2, 3, 4)
	for _, s := range c.Components {
		t.add(s.Name, statCell(s.Old, func(x *tables.RewardStats) string { return fmt.Sprintf("%.4f", x.Mean) }),
			statCell(s.New, func(x *tables.RewardStats) string { return fmt.Sprintf("%.4f", x.Mean) }),
			statCell(s.Old, func(x *tables.RewardStats) string { return fmt.Sprintf("%.4f", x.Std) }),
			statCell(s.New, func(x *tables.RewardStats) string { return fmt.Sprintf("%.4f", x.Std) }),
			statCell(s.Old, func(x *tables.RewardStats) string { return fmt.Sprintf("%g..%g", x.Min, x.Max) }),
			statCell(s.New, func(x *tables.RewardStats) string { return fmt.Sprintf("%g..%g", x.Min, x.Max) }))
	}
	if err := t.write(w); err != nil {
		return err
	}
	if len(c.Top) > 0 {
		fmt.Fprintf(w, "\nmost changed samples:\n")
		t := newTable("ITERATION", "PROMPT", "SAMPLE", "OLD", "NEW", "DELTA").alignRight(0, 2, 3, 4, 5)
		for _, ch := range c.Top {
			t.add(fmt.Sprint(ch.Iteration), ch.PromptID, fmt.Sprint(ch.SampleIndex), fmt.Sprintf("%g", ch.Old), fmt.Sprintf("%g", ch.New), fmt.Sprintf("%+g", ch.Delta))
		}
		if err := t.write(w); err != nil {
			return err
		}
	}
	if math.IsNaN(c.Spearman) {
		fmt.Fprintf(w, "\nrank agreement: undefined (one side is constant)\n")
	}
	_, err := fmt.Fprintf(w, "\nsee the changed artifacts: rlpipe diff %s %s --two-dot\n", rep.FromCommit[:12], rep.Branch)
	return err
}

func statCell(s *tables.RewardStats, f func(*tables.RewardStats) string) string {
	if s == nil {
		return "-"
	}
	return f(s)
}
