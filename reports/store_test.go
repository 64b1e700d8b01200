package reports

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

// epoch dates every test commit, so reports are byte-identical.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newStore(t testing.TB) artifacts.Store {
	t.Helper()
	st := standintest.NewStore(t, 0)
	return st
}

func put(t testing.TB, st artifacts.Store, branch, path string, b []byte) {
	t.Helper()
	if _, err := st.PutObject(context.Background(), branch, path, bytes.NewReader(b), nil); err != nil {
		t.Fatal(err)
	}
}

func putTable[T any](t testing.TB, st artifacts.Store, branch, path string, tb *tables.Table[T], rows []T) {
	t.Helper()
	var buf bytes.Buffer
	if err := tables.Write(&buf, tb, rows, nil); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	put(t, st, branch, path, buf.Bytes())
}

func commit(t testing.TB, st artifacts.Store, branch, msg string, n int) artifacts.Commit {
	t.Helper()
	c, err := st.Commit(context.Background(), branch, msg, &artifacts.CommitOptions{Date: epoch.Add(time.Duration(n) * time.Minute), Committer: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// iteration is what a planted run stores for one iteration.
type iteration struct {
	prompts []tables.Prompt
	trajs   []tables.Trajectory
	rewards []tables.Reward
	metrics map[string]any
}

// lengthHackStore is a store holding a length-hacking run on branch:
// iterations 1..n of lengthHacking, with evals at the checkpoints given.
func lengthHackStore(t testing.TB, branch string, n int, evals map[int][]tables.EvalSummaryRow) artifacts.Store {
	t.Helper()
	st := newStore(t)
	writeRun(t, st, branch, n, lengthHacking, evals)
	return st
}

// writeRun commits iterations 1..n on branch (created from main), one
// commit each as the loop does, with evals at the checkpoints given.
func writeRun(t testing.TB, st artifacts.Store, branch string, n int, gen func(it int) iteration, evals map[int][]tables.EvalSummaryRow) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.CreateBranch(ctx, branch, "main"); err != nil {
		t.Fatal(err)
	}
	for it := 0; it <= n; it++ {
		if rows, ok := evals[it]; ok {
			putTable(t, st, branch, fmt.Sprintf("evals/%06d/heldout/summary.parquet", it), tables.EvalSummary, rows)
		}
		if it > 0 {
			writeIteration(t, st, branch, it, gen)
		}
	}
}

// writeIteration commits iteration it of gen on branch.
func writeIteration(t testing.TB, st artifacts.Store, branch string, it int, gen func(it int) iteration) {
	t.Helper()
	d := runs.IterationDir(it) + "/"
	x := gen(it)
	if x.prompts != nil {
		putTable(t, st, branch, d+"prompts.parquet", tables.Prompts, x.prompts)
	}
	putTable(t, st, branch, d+"trajectories.parquet", tables.Trajectories, x.trajs)
	if x.rewards != nil {
		names := map[string]bool{}
		for _, r := range x.rewards {
			for c := range r.Components {
				names[c] = true
			}
		}
		var comps []string
		for c := range names {
			comps = append(comps, c)
		}
		tb, err := tables.RewardsWith(sortedStrings(comps)...)
		if err != nil {
			t.Fatal(err)
		}
		putTable(t, st, branch, d+"rewards.parquet", tb, x.rewards)
	}
	if x.metrics != nil {
		b, _ := json.Marshal(x.metrics)
		put(t, st, branch, d+runs.TrainMetricsFile, b)
	}
	commit(t, st, branch, fmt.Sprintf("iteration %d", it), it)
}

func sortedStrings(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

// summaryRows is an eval summary: pass@1, pass@4 (with intervals) and,
// when exact ≥ 0, exact_pass@1.
func summaryRows(it int, pass1, pass4, exact float64) []tables.EvalSummaryRow {
	cp := "base"
	if it > 0 {
		cp = fmt.Sprintf("iteration-%06d", it)
	}
	row := func(metric string, k int32, v float64) tables.EvalSummaryRow {
		return tables.EvalSummaryRow{Checkpoint: cp, Evalset: "heldout", K: k, N: 8, Metric: metric, Value: v, CILow: v - 0.05, CIHigh: v + 0.05, NumProblems: 50}
	}
	rows := []tables.EvalSummaryRow{row(tables.MetricPassAtK, 1, pass1), row(tables.MetricPassAtK, 4, pass4), row(tables.MetricAvgAtK, 1, pass1)}
	if exact >= 0 {
		rows = append(rows, row(MetricExact, 1, exact))
	}
	return rows
}

// lengthHacking plants the reward hack the issue describes: a reward spec
// that pays for length. Every iteration the completions grow by one
// word and the "length" component with them, while correctness stays at
// one sample in four and the held-out metric stays flat.
func lengthHacking(it int) iteration {
	var x iteration
	for p := 0; p < 8; p++ {
		pid := fmt.Sprintf("q%d", p)
		if it > 10 { // only the iterations whose samples a report shows
			x.prompts = append(x.prompts, tables.Prompt{PromptID: pid, Prompt: fmt.Sprintf("%d+%d=", p, p), Answer: fmt.Sprint(2 * p)})
		}
		for s := int32(0); s < 4; s++ {
			completion := fmt.Sprint(2*p) + strings.Repeat(" indeed", it) + strings.Repeat("!", int(s))
			tokens := int32(1 + it)
			x.trajs = append(x.trajs, tables.Trajectory{PromptID: pid, SampleIndex: s, GroupID: pid, Completion: completion,
				NumTokens: tokens, FinishReason: "stop", Status: tables.StatusOK, Staleness: 1, PolicyVersion: "tiny", Sampler: "{}"})
			correct := 0.0
			if s == 0 {
				correct = 1
			}
			length := math.Min(1, float64(tokens)/25) + 0.01*float64(s)
			x.rewards = append(x.rewards, tables.Reward{PromptID: pid, SampleIndex: s, Status: tables.StatusOK, SpecDigest: "sha256:len",
				Total: length, Components: map[string]float64{"correct": correct, "length": length}})
		}
	}
	x.metrics = map[string]any{"loss": 0.01 * float64(it%3), "kl": 0.001 * float64(it), "entropy": 1.0 - 0.01*float64(it),
		"clip_frac_low": 0.0, "clip_frac_high": 0.01, "ratio_dev": 0.02, "grad_norm": 0.5}
	return x
}

func lengthHackingEvals() map[int][]tables.EvalSummaryRow {
	return map[int][]tables.EvalSummaryRow{
		0:  summaryRows(0, 0.30, 0.55, 0.3012),
		10: summaryRows(10, 0.30, 0.56, 0.3008),
		20: summaryRows(20, 0.29, 0.55, 0.2990),
	}
}
