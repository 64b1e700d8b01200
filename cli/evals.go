package cli

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

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

// readPromptIDs reads the prompt ids of a prompts table.
func readPromptIDs(ctx context.Context, st artifacts.Store, ref, path string) (map[string]bool, error) {
	raw, err := artifacts.ReadObject(ctx, st, ref, path)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, fmt.Errorf("%s:%s: %w", ref, path, artifacts.ErrNotFound)
	}
	rows, err := tables.Read(bytes.NewReader(raw), int64(len(raw)), path, tables.Prompts)
	if err != nil {
		return nil, err
	}
	ids := make(map[string]bool, len(rows))
	for _, r := range rows {
		ids[r.PromptID] = true
	}
	return ids, nil
}
