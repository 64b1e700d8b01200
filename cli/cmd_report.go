package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/reports"
)

type reportOptions struct {
	out     string
	compare string
	window  int
	samples int
}

func (o *reportOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.out, "out", "", "HTML file to write (default report-<run>.html in the current directory)")
	fs.StringVar(&o.compare, "compare", "", "also compare with this run or ref: a rescoring (rewards before and after, either way round) or another run (curves overlaid)")
	fs.IntVar(&o.window, "window", 0, "iterations the alarm rules average over (default 5; see docs/REPORTS.md)")
	fs.IntVar(&o.samples, "sample-iterations", 0, "how many of the last iterations show their best and worst samples (default 10)")
}

// reportOut is `report -o json`: where the page went and the alarms.
type reportOut struct {
	Run        string `json:"run"`
	Ref        string `json:"ref"`
	Commit     string `json:"commit"`
	Path       string `json:"path"`
	Iterations int    `json:"iterations"`
	// Evals are the evaluations the page shows, as `status` and
	// `evals` print them.
	Evals   []evalOut       `json:"evals"`
	Compare string          `json:"compare,omitempty"`
	Alarms  []reports.Alarm `json:"alarms"`
}

func newReportCommand(g *rootOptions) *cobra.Command {
	return storeCommand(g, &cobra.Command{
		Use:   "report RUN [--out FILE] [--compare REF]",
		Short: "write a run's HTML report: learning curves, evals, health, alarms",
		Long: `Write one self-contained HTML file about a run: learning curves (reward,
accuracy, loss, KL), pass@k of every evaluated checkpoint, training health
per iteration computed from the stored tables, reward-hacking alarms with
their evidence, and the best and worst samples of the last iterations.
RUN is a run name (its branch is runs-RUN) or any ref holding iterations/
(a rescore branch, a commit, a tag). --compare REF adds the reward
distributions before and after a rescoring, when REF or RUN is one;
otherwise REF is another run (a name or a ref) whose learning curves and
held-out figures are overlaid on RUN's. The page loads nothing from
the network and is the same for the same store state.
The command prints the file's path; -o json prints the path and alarms.
Health metrics and alarm thresholds: docs/REPORTS.md.`,
		Example: `  rlpipe report arith
  rlpipe report arith --out /tmp/arith.html -o json
  rlpipe report arith --compare rescore-1a2b3c4d5e6f
  rlpipe report arith --compare arith-lr2e-3`,
		Args: exactArgs("RUN"),
	}, func(ctx context.Context, st artifacts.Store, o reportOptions, args []string, p printer) error {
		return reportFunc(ctx, st, args[0], o, p)
	})
}

// runRef is the ref of a run: its branch runs-<run> when there is one,
// else the argument itself (a rescore branch, a commit, a tag).
func runRef(ctx context.Context, st artifacts.Store, run string) (string, error) {
	b := runs.Branch(run)
	if artifacts.ValidateBranchName(b) == nil {
		if _, err := st.GetBranch(ctx, b); err == nil {
			return b, nil
		} else if !errors.Is(err, artifacts.ErrNotFound) {
			return "", err
		}
	}
	if _, err := st.ResolveRef(ctx, run); err != nil {
		return "", explain(err, "no run %s: neither branch %s nor a ref %s exists (see `rlpipe status`)", run, b, run)
	}
	return run, nil
}

func reportFunc(ctx context.Context, st artifacts.Store, run string, o reportOptions, p printer) error {
	ref, err := runRef(ctx, st, run)
	if err != nil {
		return err
	}
	path := o.out
	if path == "" {
		path = "report-" + filepath.Base(run) + ".html"
	}
	if o.compare != "" {
		if o.compare, err = runRef(ctx, st, o.compare); err != nil {
			return err
		}
	}
	opts := &reports.Options{Compare: o.compare, Load: &reports.LoadOptions{SampleIterations: o.samples}}
	if o.window != 0 {
		opts.Alarms = &reports.AlarmOptions{Window: o.window}
	}
	rep, err := reports.WriteHTML(ctx, st, ref, path, opts)
	if err != nil {
		return err
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if p.json {
		out := reportOut{Run: run, Ref: ref, Commit: rep.Run.Commit.ID, Path: path, Iterations: len(rep.Run.Health),
			Evals: rep.Run.Evals, Compare: o.compare, Alarms: rep.Alarms}
		if out.Evals == nil {
			out.Evals = []evalOut{}
		}
		if out.Alarms == nil {
			out.Alarms = []reports.Alarm{}
		}
		return p.JSON(out)
	}
	for _, a := range rep.Alarms {
		if err := p.Printf("alarm %s at iteration %d: %s\n", a.Rule, a.Iteration, a.Message); err != nil {
			return err
		}
	}
	return p.Printf("%s\n", path)
}

// writeRunReport refreshes a run's report at path after an iteration: the
// run command calls it so the page follows the run. It reads the run
// branch (staged changes included) and writes the file atomically;
// cache (nil for none) keeps the iterations read for the next refresh.
func writeRunReport(ctx context.Context, st artifacts.Store, run, path string, cache *reports.Cache) error {
	_, err := reports.WriteHTML(ctx, st, runs.Branch(run), path, &reports.Options{Load: &reports.LoadOptions{Cache: cache}})
	if err != nil {
		return fmt.Errorf("report %s: %w", run, err)
	}
	return nil
}
