package cli

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// evalOut is one evaluated checkpoint on one eval set, as `status -o json`
// and `eval -o json` report it.
type evalOut = runs.Eval

// readEvals reads every evals/NNNNNN/<set>/summary.parquet at ref, the
// starting policy first, then by iteration and set.
func readEvals(ctx context.Context, st artifacts.Store, ref string) ([]evalOut, error) {
	return runs.ReadEvals(ctx, st, ref)
}

// evalColumns picks the metrics a table of evals shows: exact pass@1
// when present, then pass@k for every k.
func evalColumns(evals []evalOut) []string {
	seen := map[string]bool{}
	var pass []string
	hasExact := false
	for _, e := range evals {
		for m := range e.Metrics {
			switch {
			case m == "exact_pass@1":
				hasExact = true
			case strings.HasPrefix(m, "pass@") && !seen[m]:
				seen[m] = true
				pass = append(pass, m)
			}
		}
	}
	sort.Slice(pass, func(i, j int) bool {
		a, _ := strconv.Atoi(strings.TrimPrefix(pass[i], "pass@"))
		b, _ := strconv.Atoi(strings.TrimPrefix(pass[j], "pass@"))
		return a < b
	})
	if hasExact {
		return append([]string{"exact_pass@1"}, pass...)
	}
	return pass
}

// learningLine compares the starting policy with the last evaluated
// checkpoint on the first eval set: exact pass@1 when present, else pass@1.
func learningLine(evals []evalOut) string {
	if len(evals) < 2 || evals[0].Iteration != 0 {
		return ""
	}
	first := evals[0]
	var last *evalOut
	for i := range evals {
		if evals[i].Set == first.Set && evals[i].Iteration > 0 {
			last = &evals[i]
		}
	}
	if last == nil {
		return ""
	}
	for _, m := range []string{"exact_pass@1", "pass@1"} {
		a, okA := first.Metrics[m]
		b, okB := last.Metrics[m]
		if okA && okB {
			return fmt.Sprintf("%s %s: %.4f (%s) → %.4f (%s): %+.1f points", first.Set, m, a, first.Checkpoint, b, last.Checkpoint, 100*(b-a))
		}
	}
	return ""
}

// openPrompts opens the prompts table at ref:path, read whole into
// memory, restricted to cols (nil: all).
func openPrompts(ctx context.Context, st artifacts.Store, ref, path string, cols []string) (*tables.Reader[tables.Prompt], error) {
	raw, err := artifacts.ReadObject(ctx, st, ref, path)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, fmt.Errorf("%s:%s: %w", ref, path, artifacts.ErrNotFound)
	}
	return tables.NewReader(bytes.NewReader(raw), int64(len(raw)), ref+":"+path, tables.Prompts, &tables.ReadOptions{Columns: cols})
}

func newEvalsCommand(g *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "evals RUN",
		Short: "show a run's evaluations: every metric per k with its 95% interval",
		Long: `Show the evaluations stored at a run (its branch runs-RUN) or any ref
(a rescore branch, a commit, a tag): for every evaluated checkpoint and
eval set, each metric at each k (avg@k, pass@k, pass^k, maj@k,
exact_pass@1) with its 95% interval. -o json prints the same as the
"evals" of ` + "`status -o json`" + `, ` + "`report -o json`" + ` and the UI's /api/runs/RUN: they
are one reader's.`,
		Example: `  rlpipe evals arith
  rlpipe evals rescore-1a2b3c4d5e6f -o json`,
		Args: exactArgs("RUN"),
		RunE: g.onStore(func(ctx context.Context, st artifacts.Store, args []string, p printer) error {
			return evalsFunc(ctx, st, args[0], p)
		}),
	}
}

// evalsOut is the JSON shape of `rlpipe evals`.
type evalsOut struct {
	Run   string    `json:"run"`
	Ref   string    `json:"ref"`
	Evals []evalOut `json:"evals"`
}

func evalsFunc(ctx context.Context, st artifacts.Store, run string, p printer) error {
	ref, err := runRef(ctx, st, run)
	if err != nil {
		return err
	}
	evals, err := readEvals(ctx, st, ref)
	if err != nil {
		return withOp(err, "evals %s", run)
	}
	if p.json {
		return p.JSON(evalsOut{Run: run, Ref: ref, Evals: evals})
	}
	if len(evals) == 0 {
		return p.Printf("no evaluations at %s: an eval section in the pipeline config, or `rlpipe eval`, makes them\n", ref)
	}
	t := newTable("CHECKPOINT", "SET", "METRIC", "VALUE", "95% INTERVAL").alignRight(3)
	for _, e := range evals {
		names := make([]string, 0, len(e.Metrics))
		for m := range e.Metrics {
			names = append(names, m)
		}
		sort.Slice(names, func(i, j int) bool { return metricLess(names[i], names[j]) })
		for _, m := range names {
			ci := "-"
			if iv, ok := e.Intervals[m]; ok {
				ci = fmt.Sprintf("[%.4f, %.4f]", iv[0], iv[1])
			}
			t.add(e.Checkpoint, e.Set, m, strconv.FormatFloat(e.Metrics[m], 'f', 4, 64), ci)
		}
	}
	var sb strings.Builder
	_ = t.write(&sb)
	if line := learningLine(evals); line != "" {
		sb.WriteString(line + "\n")
	}
	return p.Printf("%s", sb.String())
}

// metricLess orders metric names by family (exact first, then avg, pass,
// pass^, maj), then by k.
func metricLess(a, b string) bool {
	split := func(m string) (int, int) {
		for i, fam := range []string{"exact_pass@", "avg@", "pass@", "pass^", "maj@"} {
			if k, ok := strings.CutPrefix(m, fam); ok {
				n, _ := strconv.Atoi(k)
				return i, n
			}
		}
		return 9, 0
	}
	fa, ka := split(a)
	fb, kb := split(b)
	if fa != fb {
		return fa < fb
	}
	if ka != kb {
		return ka < kb
	}
	return a < b
}
