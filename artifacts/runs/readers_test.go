package runs_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

func commit(t *testing.T, st artifacts.Store, branch string, md map[string]string) artifacts.Commit {
	t.Helper()
	c, err := st.Commit(context.Background(), branch, "c", &artifacts.CommitOptions{Metadata: md, AllowEmpty: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A trainer's metrics file flattens to its numbers, and the metrics it
// wrote as null (kl at β = 0) are named as not computed rather than
// dropped or read as 0.
func TestParseTrainMetrics(t *testing.T) {
	m, err := runs.ParseTrainMetrics([]byte(`{"loss": -0.0025, "kl": null, "reward": {"mean": 0.5, "std": null}, "steps": [1, 2], "note": "x", "samples": "128"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]float64{"loss": -0.0025, "reward.mean": 0.5, "samples": 128}; !reflect.DeepEqual(m.Values, want) {
		t.Errorf("values %v, want %v", m.Values, want)
	}
	if want := []string{"kl", "reward.std"}; !reflect.DeepEqual(m.NotComputed, want) {
		t.Errorf("not computed %v, want %v", m.NotComputed, want)
	}
	if v, ok := m.Get("kl"); ok || v != 0 {
		t.Errorf("Get(kl) = %v, %v: a null is not a number", v, ok)
	}
	for _, bad := range []string{`[1]`, `null`, `{`, ``} {
		if _, err := runs.ParseTrainMetrics([]byte(bad)); err == nil {
			t.Errorf("ParseTrainMetrics(%q) gave no error", bad)
		}
	}
}

func TestReadTrainMetrics(t *testing.T) {
	ctx := context.Background()
	st := artifactstest.NewLocal(t)
	artifactstest.Put(t, st, "main", runs.IterationPath(1, runs.TrainMetricsFile), []byte(`{"loss": 1.5}`))
	artifactstest.Put(t, st, "main", runs.IterationPath(2, "trainer_metrics.json"), []byte(`{"loss": 2.5}`)) // another trainer's name
	artifactstest.Put(t, st, "main", runs.IterationPath(3, runs.TrainMetricsFile), []byte(`not json`))
	for n, want := range map[int]float64{1: 1.5, 2: 2.5} {
		m, err := runs.ReadTrainMetrics(ctx, st, "main", n)
		if v, ok := m.Get("loss"); err != nil || !ok || v != want {
			t.Errorf("iteration %d: loss %v %v, %v; want %v", n, v, ok, err, want)
		}
	}
	for _, n := range []int{3, 4} {
		if m, err := runs.ReadTrainMetrics(ctx, st, "main", n); m != nil || err != nil {
			t.Errorf("iteration %d: %+v, %v; want nothing", n, m, err)
		}
	}
}

// Every metric keeps its k: pass^1 and pass^4 are two figures, not one
// pass^k holding the last; a metric no problem could score is left out.
func TestReadEvals(t *testing.T) {
	ctx := context.Background()
	st := artifactstest.NewLocal(t)
	rows := []tables.EvalSummaryRow{
		{Checkpoint: "iteration-000002", Evalset: "heldout", K: 1, N: 4, Metric: tables.MetricPassAtK, Value: 0.4, CILow: 0.3, CIHigh: 0.5, NumProblems: 50},
		{Checkpoint: "iteration-000002", Evalset: "heldout", K: 4, N: 4, Metric: tables.MetricPassAtK, Value: 0.6, CILow: 0.5, CIHigh: 0.7, NumProblems: 50},
		{Checkpoint: "iteration-000002", Evalset: "heldout", K: 1, N: 4, Metric: tables.MetricPassHatK, Value: 0.4, CILow: 0.3, CIHigh: 0.5, NumProblems: 50},
		{Checkpoint: "iteration-000002", Evalset: "heldout", K: 4, N: 4, Metric: tables.MetricPassHatK, Value: 0.2, CILow: math.NaN(), CIHigh: math.NaN(), NumProblems: 50},
		{Checkpoint: "iteration-000002", Evalset: "heldout", K: 4, N: 4, Metric: tables.MetricMajAtK, Value: math.NaN(), NumProblems: 50},
		{Checkpoint: "iteration-000002", Evalset: "heldout", K: 1, N: 4, Metric: "exact_pass@1", Value: 0.41, CILow: 0.4, CIHigh: 0.42, NumProblems: 50},
	}
	var buf bytes.Buffer
	if err := tables.Write(&buf, tables.EvalSummary, rows, nil); err != nil {
		t.Fatal(err)
	}
	artifactstest.Put(t, st, "main", runs.EvalPath(2, "heldout", runs.SummaryFile), buf.Bytes())
	artifactstest.Put(t, st, "main", runs.EvalPath(2, "heldout", runs.SamplesFile), []byte("not read"))
	artifactstest.Put(t, st, "main", "evals/notes.txt", []byte("not an evaluation"))
	evals, err := runs.ReadEvals(ctx, st, "main")
	if err != nil {
		t.Fatal(err)
	}
	want := []runs.Eval{{Iteration: 2, Checkpoint: "iteration-000002", Set: "heldout", Problems: 50, N: 4,
		Metrics:   map[string]float64{"pass@1": 0.4, "pass@4": 0.6, "pass^1": 0.4, "pass^4": 0.2, "exact_pass@1": 0.41},
		Intervals: map[string][2]float64{"pass@1": {0.3, 0.5}, "pass@4": {0.5, 0.7}, "pass^1": {0.3, 0.5}, "exact_pass@1": {0.4, 0.42}},
		Path:      "evals/000002/heldout/summary.parquet"}}
	if !reflect.DeepEqual(evals, want) {
		t.Errorf("ReadEvals:\n got %+v\nwant %+v", evals, want)
	}

	// Summaries are read in parallel and come back in checkpoint and set
	// order; of two corrupt ones, the error names the first.
	for n := 3; n <= 40; n++ {
		for _, set := range []string{"b", "a"} {
			rows[0].Checkpoint = fmt.Sprintf("iteration-%06d", n)
			buf.Reset()
			if err := tables.Write(&buf, tables.EvalSummary, rows[:1], nil); err != nil {
				t.Fatal(err)
			}
			artifactstest.Put(t, st, "main", runs.EvalPath(n, set, runs.SummaryFile), buf.Bytes())
		}
	}
	evals, err = runs.ReadEvals(ctx, st, "main")
	if err != nil || len(evals) != 1+38*2 {
		t.Fatalf("%d evals, %v; want 77", len(evals), err)
	}
	for i, e := range evals[1:] {
		if want := fmt.Sprintf("%d %s iteration-%06d", 3+i/2, []string{"a", "b"}[i%2], 3+i/2); fmt.Sprintf("%d %s %s", e.Iteration, e.Set, e.Checkpoint) != want {
			t.Fatalf("eval %d: %d %s %s, want %s", i+1, e.Iteration, e.Set, e.Checkpoint, want)
		}
	}
	some, err := runs.ReadCheckpointEvals(ctx, st, "main", 40, 3, 41)
	var got []string
	for _, e := range some {
		got = append(got, fmt.Sprintf("%d %s", e.Iteration, e.Set))
	}
	if err != nil || strings.Join(got, ",") != "3 a,3 b,40 a,40 b" {
		t.Fatalf("ReadCheckpointEvals(40, 3, 41) = %v, %v; want 3 a, 3 b, 40 a, 40 b", got, err)
	}
	artifactstest.Put(t, st, "main", runs.EvalPath(31, "a", runs.SummaryFile), []byte("not parquet"))
	artifactstest.Put(t, st, "main", runs.EvalPath(17, "b", runs.SummaryFile), []byte("not parquet either"))
	for range 5 {
		if _, err := runs.ReadEvals(ctx, st, "main"); err == nil || !strings.Contains(err.Error(), "evals/000017/b/summary.parquet") {
			t.Fatalf("ReadEvals with corrupt summaries at 17 and 31: %v, want the error of 17's", err)
		}
	}
}

// History walks a run's iteration commits newest first, over the
// evaluation and rescoring commits on top, and stops where the run
// branched off; List names a run's last iteration even under an
// evaluation's commit.
func TestHistoryAndList(t *testing.T) {
	ctx := context.Background()
	st := artifactstest.NewLocal(t)
	commit(t, st, "main", map[string]string{"note": "the dataset"})
	if _, err := st.CreateBranch(ctx, runs.Branch("a"), "main"); err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 3; n++ {
		artifactstest.Put(t, st, runs.Branch("a"), runs.StatePath, []byte(`{"iteration": `+strconv.Itoa(n)+`, "cursor": 4, "adapters": {}, "seed": 9}`))
		commit(t, st, runs.Branch("a"), map[string]string{runs.MetaRun: "a", runs.MetaIteration: strconv.Itoa(n), runs.MetaConfigHash: "h"})
	}
	commit(t, st, runs.Branch("a"), map[string]string{runs.MetaRun: "a", runs.MetaEval: "heldout"})
	// Run b branched off a's iteration 2.
	a2 := "runs-a~2"
	c, err := st.ResolveRef(ctx, a2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateBranch(ctx, runs.Branch("b"), c.ID); err != nil {
		t.Fatal(err)
	}
	commit(t, st, runs.Branch("b"), map[string]string{runs.MetaRun: "b", runs.MetaIteration: "1"})
	commit(t, st, runs.Branch("b"), map[string]string{"rlpipe.rescore-from": c.ID})

	got := func(run string) []int {
		var out []int
		for c, err := range runs.History(ctx, st, run, runs.Branch(run)) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, c.Iteration)
		}
		return out
	}
	if h := got("a"); !reflect.DeepEqual(h, []int{3, 2, 1}) {
		t.Errorf("history of a: %v", h)
	}
	if h := got("b"); !reflect.DeepEqual(h, []int{1}) {
		t.Errorf("history of b: %v, want only its own iteration", h)
	}
	list, err := runs.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Run != "a" || list[0].Iteration != 3 || list[1].Run != "b" || list[1].Iteration != 1 {
		t.Errorf("List = %+v; want a at 3 and b at 1, under its rescoring", list)
	}
	s, err := runs.ReadState(ctx, st, runs.Branch("a"))
	if err != nil || s == nil || s.Iteration != 3 || s.Seed != 9 {
		t.Errorf("ReadState = %+v, %v", s, err)
	}
	if s, err := runs.ReadState(ctx, st, "main"); s != nil || err != nil {
		t.Errorf("ReadState of main = %+v, %v; want none", s, err)
	}
	artifactstest.Put(t, st, "main", runs.StatePath, []byte("{"))
	if _, err := runs.ReadState(ctx, st, "main"); err == nil || !bytes.Contains([]byte(err.Error()), []byte("main:run/state.json is not a run record")) {
		t.Errorf("a broken state: %v", err)
	}
}
