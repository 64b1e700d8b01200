package reports

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/steptest"
)

// TestHealthTableRoundTrip: what WriteHealth writes, readHealth reads back
// field for field, NaN for NaN, including a component a row names but has
// no finite value of, and rows with different components.
func TestHealthTableRoundTrip(t *testing.T) {
	ctx := context.Background()
	trajs, rws := handMade()
	tm := &TrainMetrics{Loss: ptr(0.5), KL: ptr(0.01), GradNorm: ptr(0.7)}
	a := ComputeHealth(3, trajs, rws, tm, nil)
	// Iteration 4: only NaN values of "judge", and no "format".
	var rws4 []tables.Reward
	for _, r := range rws {
		r.Components = map[string]float64{"correct": r.Components["correct"], "judge": math.NaN()}
		rws4 = append(rws4, r)
	}
	b := ComputeHealth(4, trajs, rws4, nil, nil)
	if _, ok := b.Components["judge"]; ok || !strings.Contains(strings.Join(b.ComponentNames, " "), "judge") {
		t.Fatalf("the planted row is not what this test needs: %+v", b)
	}
	empty := ComputeHealth(5, nil, nil, nil, nil)
	rows := []Health{a, b, empty}
	var buf bytes.Buffer
	if err := WriteHealth(&buf, rows); err != nil {
		t.Fatal(err)
	}
	f, err := tables.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "health.parquet", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readHealth(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rows) {
		t.Fatalf("%d rows read, %d written", len(got), len(rows))
	}
	for i := range rows {
		// %+v prints NaN as NaN and maps in key order.
		if w, g := fmt.Sprintf("%+v", rows[i]), fmt.Sprintf("%+v", got[i]); w != g {
			t.Errorf("row %d:\nwrote %s\nread  %s", i, w, g)
		}
	}
}

// countingStore counts the objects read through it, by path.
type countingStore struct {
	artifacts.Store
	mu    sync.Mutex
	reads map[string]int
}

func (s *countingStore) GetObject(ctx context.Context, ref, path string) (io.ReadCloser, artifacts.ObjectInfo, error) {
	s.mu.Lock()
	s.reads[path]++
	s.mu.Unlock()
	return s.Store.GetObject(ctx, ref, path)
}

// readsOf is how many of the counted reads were of files named file.
func (s *countingStore) readsOf(file string) int {
	n := 0
	for p, c := range s.reads {
		if strings.HasSuffix(p, "/"+file) {
			n += c
		}
	}
	return n
}

// putHealth stages iteration n's health.parquet on branch as the health
// stage writes it: the row computed from the iteration's stored tables,
// and their SHA-256 in the file's metadata.
func putHealth(t *testing.T, st artifacts.Store, branch string, n int, version string) {
	t.Helper()
	ctx := context.Background()
	meta := map[string]string{metaHealthTask: version}
	var trajs []tables.Trajectory
	var rws []tables.Reward
	var tm *TrainMetrics
	for _, in := range healthInputs {
		b, err := artifacts.ReadObject(ctx, st, branch, runs.IterationPath(n, in.file))
		if err != nil {
			t.Fatal(err)
		}
		sum := ""
		if b != nil {
			s := sha256.Sum256(b)
			sum = hex.EncodeToString(s[:])
		}
		meta[metaHealthFrom+in.name] = sum
		switch in.file {
		case runs.TrajectoriesFile:
			trajs, err = tables.Read(bytes.NewReader(b), int64(len(b)), in.file, tables.Trajectories)
		case runs.RewardsFile:
			rws, err = tables.Read(bytes.NewReader(b), int64(len(b)), in.file, tables.Rewards)
		default:
			tm, err = ParseTrainMetrics(b)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := writeHealth(&buf, []Health{ComputeHealth(n, trajs, rws, tm, nil)}, meta); err != nil {
		t.Fatal(err)
	}
	put(t, st, branch, runs.IterationPath(n, runs.HealthFile), buf.Bytes())
}

// TestLoadReadsStoredHealth: with each iteration's health row stored by
// the health stage, Load reads the rows instead of the tables for every
// iteration whose samples it does not show, and gets the same run; a row
// whose inputs changed (a rescoring), whose stage version is older, or
// whose file is damaged is recomputed from the tables.
func TestLoadReadsStoredHealth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := lengthHackStore(t, "runs-a", 12, lengthHackingEvals())
	want, err := Load(ctx, st, "runs-a", &LoadOptions{SampleIterations: 3})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 12; n++ {
		putHealth(t, st, "runs-a", n, healthTaskVersion)
	}
	commit(t, st, "runs-a", "health rows", 50)

	cs := &countingStore{Store: st, reads: map[string]int{}}
	got, err := Load(ctx, cs, "runs-a", &LoadOptions{SampleIterations: 3})
	if err != nil {
		t.Fatal(err)
	}
	got.Commit = want.Commit // the health commit moved the branch
	if w, g := fmt.Sprintf("%+v", want), fmt.Sprintf("%+v", got); w != g {
		t.Fatalf("from the stored rows:\n%s\nfrom the tables:\n%s", g, w)
	}
	if n, h := cs.readsOf(runs.TrajectoriesFile), cs.readsOf(runs.HealthFile); n != 3 || h != 9 {
		t.Fatalf("read %d trajectories tables and %d health rows, want 3 (the sampled iterations) and 9", n, h)
	}
	// The health options the stage did not use: every row is computed.
	cs.reads = map[string]int{}
	if _, err := Load(ctx, cs, "runs-a", &LoadOptions{SampleIterations: 3, Health: &HealthOptions{PassThreshold: 0.9}}); err != nil {
		t.Fatal(err)
	}
	if n := cs.readsOf(runs.TrajectoriesFile); n != 12 {
		t.Fatalf("with other health options, %d trajectories tables read, want 12", n)
	}

	// Three rows that must not be used: iteration 2's rewards rescored
	// (every sample now scores 1), iteration 3's row from an older stage
	// version, iteration 4's file damaged.
	if _, err := st.CreateBranch(ctx, "rescore-a", "runs-a"); err != nil {
		t.Fatal(err)
	}
	x := lengthHacking(2)
	for i := range x.rewards {
		x.rewards[i].Total = 1
	}
	tb, err := tables.RewardsWith("correct", "length")
	if err != nil {
		t.Fatal(err)
	}
	putTable(t, st, "rescore-a", runs.IterationPath(2, runs.RewardsFile), tb, x.rewards)
	putHealth(t, st, "rescore-a", 3, "health-1")
	put(t, st, "rescore-a", runs.IterationPath(4, runs.HealthFile), []byte("PAR1 not a table PAR1"))
	commit(t, st, "rescore-a", "rescore", 51)
	cs.reads = map[string]int{}
	res, err := Load(ctx, cs, "rescore-a", &LoadOptions{SampleIterations: 3})
	if err != nil {
		t.Fatal(err)
	}
	if n := cs.readsOf(runs.TrajectoriesFile); n != 6 {
		t.Fatalf("%d trajectories tables read on the rescore branch, want 6 (3 sampled, 3 recomputed)", n)
	}
	if h := res.Health[1]; h.Iteration != 2 || h.Reward.Mean != 1 || h.Reward.Std != 0 {
		t.Fatalf("rescored iteration 2 = %+v, want the new rewards' figures", h.Reward)
	}
	for _, i := range []int{2, 3} {
		if w, g := fmt.Sprintf("%+v", want.Health[i]), fmt.Sprintf("%+v", res.Health[i]); w != g {
			t.Fatalf("iteration %d recomputed:\n%s\nwant\n%s", i+1, g, w)
		}
	}
}

// TestLoadJudgesByTheRewardsFileRule: a report recomputes health with
// the correctness rule the rewards file records (a spec's `correct:`
// key), and without one with the default of its columns; the health
// stage reads the same rule from the same file.
func TestLoadJudgesByTheRewardsFileRule(t *testing.T) {
	ctx := context.Background()
	ok := tables.StatusOK
	c := func(acc, odd float64) map[string]float64 { return map[string]float64{"accuracy": acc, "odd": odd} }
	// p1: both samples right but odd (total 0); p2: one right and even
	// (total 1), one wrong.
	trajs := []tables.Trajectory{
		{PromptID: "p1", SampleIndex: 0, GroupID: "p1", Completion: "13", Status: ok},
		{PromptID: "p1", SampleIndex: 1, GroupID: "p1", Completion: "13", Status: ok},
		{PromptID: "p2", SampleIndex: 0, GroupID: "p2", Completion: "12", Status: ok},
		{PromptID: "p2", SampleIndex: 1, GroupID: "p2", Completion: "10", Status: ok},
	}
	rws := []tables.Reward{reward("p1", 0, 0, c(1, -1)), reward("p1", 1, 0, c(1, -1)), reward("p2", 0, 1, c(1, 0)), reward("p2", 1, 0, c(0, 0))}
	tests := []struct {
		name      string
		rule      *tables.Correctness
		all, none float64
	}{
		{name: "no rule recorded: the total above 0", all: 0, none: 0.5},
		{name: "correct: accuracy recorded", rule: &tables.Correctness{Component: "accuracy", Threshold: 0.5}, all: 0.5, none: 0},
	}
	st := newStore(t)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			branch := fmt.Sprintf("runs-rule%d", i)
			if _, err := st.CreateBranch(ctx, branch, "main"); err != nil {
				t.Fatal(err)
			}
			tb, err := tables.RewardsWith("accuracy", "odd")
			if err != nil {
				t.Fatal(err)
			}
			if tc.rule != nil {
				tb = tb.WithMetadata(tables.MetaCorrect, tc.rule.Meta())
			}
			putTable(t, st, branch, runs.IterationPath(1, runs.TrajectoriesFile), tables.Trajectories, trajs)
			putTable(t, st, branch, runs.IterationPath(1, runs.RewardsFile), tb, rws)
			commit(t, st, branch, "iteration 1", 1)
			run, err := Load(ctx, st, branch, &LoadOptions{SampleIterations: -1})
			if err != nil {
				t.Fatal(err)
			}
			if len(run.Health) != 1 {
				t.Fatalf("%d health rows, want 1", len(run.Health))
			}

			// The loop's health stage, through the engine, on the same files.
			pr, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: fmt.Sprintf("stage%d", i), Seed: 1, Envs: map[string]pipeline.Settings{"health": {}}})
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			it := pr.Iteration(1)
			node := it.Go(ctx, HealthTask(), pipeline.Call{Inputs: map[string]pipeline.Artifact{
				"trajectories": pipeline.StoreArtifact(branch, runs.IterationPath(1, runs.TrajectoriesFile)),
				"rewards":      pipeline.StoreArtifact(branch, runs.IterationPath(1, runs.RewardsFile))}, Params: map[string]int{"iteration": 1}})
			if err := node.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := it.Commit(ctx, nil, nil); err != nil {
				t.Fatal(err)
			}
			b, err := artifacts.ReadObject(ctx, st, pr.Branch(), runs.IterationPath(1, runs.HealthFile))
			if err != nil {
				t.Fatal(err)
			}
			f, err := tables.OpenFile(bytes.NewReader(b), int64(len(b)), "health.parquet", nil)
			if err != nil {
				t.Fatal(err)
			}
			stage, err := readHealth(ctx, f)
			if err != nil || len(stage) != 1 {
				t.Fatalf("health stage wrote %d rows: %v", len(stage), err)
			}
			for who, h := range map[string]Health{"report": run.Health[0], "health stage": stage[0]} {
				if h.FracSolvedAll != tc.all || h.FracSolvedNone != tc.none || h.FracMixed != 0.5 {
					t.Errorf("%s: solved all %v, none %v, mixed %v; want %v, %v, 0.5", who, h.FracSolvedAll, h.FracSolvedNone, h.FracMixed, tc.all, tc.none)
				}
			}
		})
	}
}

// TestHealthStepConformance: the health step passes the shared step
// suite.
func TestHealthStepConformance(t *testing.T) {
	steptest.Run(t, func(testing.TB) pipeline.Step { return HealthStep() })
}
