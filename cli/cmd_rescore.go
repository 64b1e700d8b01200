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
}

func (o *rescoreOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.from, "from", "", "the ref whose iterations are rescored (a run branch such as runs-exp1, a commit, a tag)")
	fs.StringVar(&o.reward, "reward", "", "the new reward spec (YAML; see docs/REWARDS.md)")
	fs.StringVar(&o.branch, "branch", "", "branch for the new rewards (default: rescore-<spec digest>)")
	fs.IntVar(&o.top, "top", 10, "how many of the most changed samples to list")
	fs.BoolVar(&o.noCache, "no-cache", false, "rescore iterations already rescored with this spec")
}

func newRescoreCommand(g *rootOptions) *cobra.Command {
	return withOptions(&cobra.Command{
		Use:   "rescore --from REF --reward SPEC.yaml [--branch NAME]",
		Short: "try a new reward on stored rollouts, on a branch",
		Long: `Branch the store at REF and recompute every iteration's rewards from its
stored trajectories with a new reward spec. No rollout is regenerated, and
memoized judge calls are replayed, not paid again. The new rewards and a
comparison (reports/rescore.json) are committed on the branch; the command
prints the comparison: each component's distribution before and after, the
samples that moved most, rank agreement, and how many prompt groups gain or
lose reward variance. Compare artifacts with ` + "`rlpipe diff REF BRANCH`" + `.`,
		Example: `  rlpipe rescore --from runs-exp1 --reward new.yaml
  rlpipe rescore --from runs-exp1~3 --reward strict.yaml --branch try-strict -o json`,
		Args: exactArgs(),
	}, func(cmd *cobra.Command, o rescoreOptions, _ []string) error {
		if o.from == "" || o.reward == "" {
			return usagef("rescore needs --from REF and --reward SPEC.yaml")
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
