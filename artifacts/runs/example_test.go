package runs_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// Read a run's evaluations: every metric at its k, with its interval.
func ExampleReadEvals() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "runs-example")
	defer os.RemoveAll(dir)
	st, _ := local.Create(ctx, filepath.Join(dir, "store"), "main", nil)
	defer st.Close()

	// What the eval stage writes for checkpoint 10 of run arith.
	branch := runs.Branch("arith")
	st.CreateBranch(ctx, branch, "main")
	var buf bytes.Buffer
	tables.Write(&buf, tables.EvalSummary, []tables.EvalSummaryRow{
		{Checkpoint: "iteration-000010", Evalset: "heldout", K: 1, N: 8, Metric: tables.MetricPassAtK, Value: 0.5, CILow: 0.4, CIHigh: 0.6, NumProblems: 100},
		{Checkpoint: "iteration-000010", Evalset: "heldout", K: 8, N: 8, Metric: tables.MetricPassAtK, Value: 0.9, CILow: 0.83, CIHigh: 0.94, NumProblems: 100},
	}, nil)
	st.PutObject(ctx, branch, runs.EvalPath(10, "heldout", runs.SummaryFile), &buf, nil)
	st.Commit(ctx, branch, "evaluate checkpoint 10", &artifacts.CommitOptions{Metadata: map[string]string{runs.MetaRun: "arith", runs.MetaEval: "heldout"}})

	evals, _ := runs.ReadEvals(ctx, st, branch)
	for _, e := range evals {
		for _, m := range []string{"pass@1", "pass@8"} {
			fmt.Printf("%s %s %s %.2f %v\n", e.Checkpoint, e.Set, m, e.Metrics[m], e.Intervals[m])
		}
	}
	// Output:
	// iteration-000010 heldout pass@1 0.50 [0.4 0.6]
	// iteration-000010 heldout pass@8 0.90 [0.83 0.94]
}
