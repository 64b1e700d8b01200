package rescore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/advantages/estimatortest"
	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/rewards/rescore"
	"github.com/rlpipe/rlpipe/rewards/rewardstest"
)

// runLoop makes a store with a 3-iteration stand-in run on branch runs-r.
func runLoop(t *testing.T) artifacts.Store {
	t.Helper()
	st := standintest.NewStore(t, 6)
	envs := map[string]pipeline.Settings{"sample": {}, "generate": {}, "reward": {}, "train": {}}
	cfg := pipeline.LoopConfig{Iterations: 3, BatchSize: 4, Dataset: pipeline.StoreArtifact("main", standintest.DatasetPath)}
	standintest.Loop(t, st, pipeline.RunOptions{Name: "r", Seed: 4, Envs: envs}, cfg, standin.Stages(standin.Options{SamplesPerPrompt: 4}))
	return st
}

// runsReward is the stand-in's own (buggy) reward as a spec: 1 unless the
// completion ends in "0", which also fails right answers such as 10.
// fixedReward is the fixed one, without a weight (1 by default).
const (
	runsReward  = "components:\n  - name: correct\n    expr: 'completion.endsWith(\"0\") ? 0.0 : 1.0'\n    weight: 1.0\n"
	fixedReward = "components:\n  - name: correct\n    expr: 'num_equal(extract_answer(completion), answer, 1e-9) ? 1.0 : 0.0'\n"
)

// rescored is the report of a rescoring that must succeed.
func rescored(ctx context.Context, t *testing.T, st artifacts.Store, opts rescore.Options) tables.RescoreReport {
	t.Helper()
	rep, err := rescore.Run(ctx, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestRescoreSameRewardChangesNothing(t *testing.T) {
	ctx := context.Background()
	st := runLoop(t)
	rep := rescored(ctx, t, st, rescore.Options{From: "runs-r", Branch: "rescore-same", Reward: rewardstest.Program(t, "new.yaml", runsReward)})
	c := rep.Comparison
	if len(rep.Iterations) != 3 || c.Samples != 48 || c.Scored != 48 || c.Changed != 0 || c.Spearman < 0.999 {
		t.Fatalf("report = %+v", rep)
	}
}

func TestRescoreFixesARewardBug(t *testing.T) {
	ctx := context.Background()
	st := runLoop(t)
	rep := rescored(ctx, t, st, rescore.Options{From: "runs-r", Reward: rewardstest.Program(t, "new.yaml", fixedReward+"    weight: 1.0\n")})
	// Every change is a right answer ending in 0 that the old reward failed.
	c := rep.Comparison
	if c.Changed == 0 || c.ZeroToNonzeroGroups == 0 {
		t.Fatalf("comparison = %v", c)
	}
	for _, ch := range c.Top {
		if ch.Old != 0 || ch.New != 1 {
			t.Fatalf("change %+v: want 0 → 1", ch)
		}
	}
}

func TestRescoreNewRewardOnABranch(t *testing.T) {
	ctx := context.Background()
	st := runLoop(t)
	before, err := st.ResolveRef(ctx, "runs-r")
	if err != nil {
		t.Fatal(err)
	}
	// A stricter reward: half credit for correct answers over 8 characters.
	strict := rewardstest.Program(t, "new.yaml", `components:
  - name: correct
    expr: 'num_equal(extract_answer(completion), answer, 1e-9) ? 1.0 : 0.0'
    weight: 1.0
  - name: short
    expr: 'size(answer) <= 1 ? 1.0 : 0.0'
    weight: 0.5
`)
	start := time.Now()
	rep, err := rescore.Run(ctx, st, rescore.Options{From: "runs-r", Reward: strict})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rescored %d samples in %s", rep.Comparison.Samples, time.Since(start))
	if rep.Branch == "" || rep.Comparison.Changed == 0 || len(rep.Comparison.Components) != 3 {
		t.Fatalf("report = %+v", rep)
	}
	// The source run is untouched; the branch holds new rewards and the report.
	after, _ := st.ResolveRef(ctx, "runs-r")
	if after.ID != before.ID {
		t.Fatal("rescoring moved the source branch")
	}
	var changed []string
	for ch, err := range st.Diff(ctx, "runs-r", rep.Branch, &artifacts.DiffOptions{TwoDot: true, Prefix: "iterations/"}) {
		if err != nil {
			t.Fatal(err)
		}
		changed = append(changed, ch.Path)
	}
	if fmt.Sprint(changed) != "[iterations/000001/rewards.parquet iterations/000002/rewards.parquet iterations/000003/rewards.parquet]" {
		t.Fatalf("changed artifacts = %v; want only the three rewards files (no trajectory regenerated)", changed)
	}
	if _, err := st.StatObject(ctx, rep.Branch, runs.RescoreReportPath); err != nil {
		t.Fatal(err)
	}
	// The commit says what it rescored, not "iteration 0".
	head, err := st.ResolveRef(ctx, rep.Branch)
	if err != nil {
		t.Fatal(err)
	}
	wantMsg := fmt.Sprintf("rescore 3 iterations of runs-r (%s) with reward spec %s", before.ID[:12], strings.TrimPrefix(strict.Digest(), "sha256:")[:12])
	if head.Message != wantMsg {
		t.Errorf("rescoring commit message %q, want %q", head.Message, wantMsg)
	}
	// Again with the same spec: every iteration is a cache hit.
	rep2, err := rescore.Run(ctx, st, rescore.Options{From: "runs-r", Reward: strict})
	if err != nil {
		t.Fatal(err)
	}
	if rep2.Cached != 3 || rep2.Comparison.Changed != rep.Comparison.Changed {
		t.Fatalf("second rescoring: %d cached, %d changed", rep2.Cached, rep2.Comparison.Changed)
	}
}

// runLoopWithAdvantages is runLoop with the loop's advantages step, with
// options that are not the defaults.
func runLoopWithAdvantages(t *testing.T, o advantages.TrainOptions) artifacts.Store {
	t.Helper()
	ctx := context.Background()
	st := standintest.NewStore(t, 6)
	envs := map[string]pipeline.Settings{"sample": {}, "generate": {}, "reward": {}, "advantages": {}, "train": {}}
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "r", Seed: 4, Envs: envs})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	stages := standin.Stages(standin.Options{SamplesPerPrompt: 4})
	stages.Steps = []pipeline.Step{advantages.Step(o)}
	cfg := pipeline.LoopConfig{Iterations: 3, BatchSize: 4, Dataset: pipeline.StoreArtifact("main", "data/prompts.parquet")}
	if _, err := r.Loop(ctx, cfg, stages); err != nil {
		t.Fatal(err)
	}
	return st
}

// Rescored advantages are the run's: with the run's own reward they are
// the run's advantages.parquet byte for byte, with a new reward they are
// what the run's advantages step (its options, not the defaults) makes of
// the new rewards.
func TestRescoreRecomputesAdvantages(t *testing.T) {
	ctx := context.Background()
	opts := advantages.TrainOptions{Options: advantages.Options{NoStd: true}, KeepZeroStd: true}
	st := runLoopWithAdvantages(t, opts)
	rep := rescored(ctx, t, st, rescore.Options{From: "runs-r", Branch: "rescore-same", Reward: rewardstest.Program(t, "new.yaml", runsReward)})
	for n := 1; n <= 3; n++ {
		path := runs.IterationPath(n, runs.AdvantagesFile)
		if !bytes.Equal(standintest.Read(t, st, rep.Branch, path), standintest.Read(t, st, "runs-r", path)) {
			t.Errorf("%s rescored with the run's reward differs from the run's", path)
		}
	}

	rep = rescored(ctx, t, st, rescore.Options{From: "runs-r", Reward: rewardstest.Program(t, "new.yaml", fixedReward)})
	if rep.Comparison.Changed == 0 {
		t.Fatal("the fixed reward changed nothing: the test shows nothing")
	}
	for n := 1; n <= 3; n++ {
		trajs := standintest.ReadRows(t, st, "runs-r", runs.IterationPath(n, runs.TrajectoriesFile), tables.Trajectories)
		rws := standintest.ReadRows(t, st, rep.Branch, runs.IterationPath(n, runs.RewardsFile), tables.Rewards)
		want, err := advantages.Join(trajs, rws, opts)
		if err != nil {
			t.Fatal(err)
		}
		got := standintest.ReadRows(t, st, rep.Branch, runs.IterationPath(n, runs.AdvantagesFile), tables.Advantages)
		if !reflect.DeepEqual(got, want.Advantages) {
			t.Errorf("iteration %d: rescored advantages are not the run's step on the new rewards:\n got %+v\nwant %+v", n, got[:2], want.Advantages[:2])
		}
	}
}

// A run whose advantages step used an estimator other than GRPO is
// rescored with it when the program registers it (the run's reward gives
// the run's advantages byte for byte), and refused, naming the estimator
// and the known ones, when it does not.
func TestRescoreWithTheRunsEstimator(t *testing.T) {
	ctx := context.Background()
	st := runLoopWithAdvantages(t, advantages.TrainOptions{Options: advantages.Options{Estimator: estimatortest.Half}})
	same := rewardstest.Program(t, "new.yaml", runsReward)
	rep := rescored(ctx, t, st, rescore.Options{From: "runs-r", Branch: "rescore-half", Reward: same,
		Estimators: advantages.Estimators{advantages.GRPO, estimatortest.Half}})
	path := runs.IterationPath(1, runs.AdvantagesFile)
	if !bytes.Equal(standintest.Read(t, st, rep.Branch, path), standintest.Read(t, st, "runs-r", path)) {
		t.Errorf("%s rescored with the run's reward and estimator differs from the run's", path)
	}
	_, err := rescore.Run(ctx, st, rescore.Options{From: "runs-r", Branch: "rescore-grpo-only", Reward: same,
		Estimators: advantages.Estimators{advantages.GRPO}})
	if !errors.Is(err, advantages.ErrUnknownEstimator) || !strings.Contains(err.Error(), `unknown advantage estimator "half": use grpo; rescore with a program that registers it`) {
		t.Errorf("without the estimator: %v", err)
	}
}

// An advantages table the loop did not write cannot be recomputed as the
// run did: the rescoring stops and names it, before anything runs.
func TestRescoreRefusesForeignAdvantages(t *testing.T) {
	ctx := context.Background()
	st := runLoop(t)
	f := filepath.Join(t.TempDir(), "a.parquet")
	fh, err := os.Create(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := tables.Write(fh, tables.Advantages, []tables.Advantage{{PromptID: "p0", Reason: "stale"}}, nil); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	putFile(t, st, "runs-r", "iterations/000002/advantages.parquet", f)
	if _, err := st.Commit(ctx, "runs-r", "advantages", nil); err != nil {
		t.Fatal(err)
	}
	_, err = rescore.Run(ctx, st, rescore.Options{From: "runs-r", Reward: rewardstest.Program(t, "new.yaml", fixedReward)})
	if err == nil || !errors.Is(err, artifacts.ErrInvalid) || !strings.Contains(err.Error(), "iterations/000002/advantages.parquet was not written by the advantages step") {
		t.Fatalf("err = %v", err)
	}
}

// TestRescoreReplaysJudgments: a judge built by runners.Compile is
// memoized through each task call, so rescoring again without the task
// cache makes no request.
func TestRescoreReplaysJudgments(t *testing.T) {
	ctx := context.Background()
	st := runLoop(t)
	var requests atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) != 1 {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		// The stand-in's own reward: 1 unless the completion ends in "0".
		score := 1
		if strings.HasSuffix(req.Messages[0].Content, "0") {
			score = 0
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"Score: %d"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2}}`, score)
	}))
	defer api.Close()
	judged := rewardstest.Program(t, "new.yaml", `judges:
  - name: grader
    base_url: `+api.URL+`/v1
    model: grader
    retries: -1
    rubric: "Reply with 'Score: 1' or 'Score: 0' for the answer {{.Completion}}"
components:
  - name: correct
    expr: 'judges.grader.score'
    weight: 1.0
`)
	rep := rescored(ctx, t, st, rescore.Options{From: "runs-r", Branch: "judged", Reward: judged})
	first := requests.Load()
	again := rescored(ctx, t, st, rescore.Options{From: "runs-r", Branch: "judged", Reward: judged, NoCache: true})
	for _, r := range []tables.RescoreReport{rep, again} {
		if c := r.Comparison; r.Cached != 0 || c.Samples != 48 || c.Scored != 48 || c.Changed != 0 {
			t.Fatalf("report = %+v", r)
		}
	}
	if first == 0 || requests.Load() != first {
		t.Fatalf("requests: %d in the first rescoring, %d in the second; want some, then none", first, requests.Load()-first)
	}
}

func TestRescoreErrors(t *testing.T) {
	ctx := context.Background()
	st := runLoop(t)
	s := rewardstest.Program(t, "new.yaml", "components:\n  - name: c\n    expr: '1.0'\n    weight: 1.0\n")
	if _, err := rescore.Run(ctx, st, rescore.Options{From: "runs-r"}); !errors.Is(err, artifacts.ErrInvalid) {
		t.Fatalf("no reward: %v", err)
	}
	if _, err := rescore.Run(ctx, st, rescore.Options{From: "nope", Reward: s}); !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("unknown ref: %v", err)
	}
	if _, err := rescore.Run(ctx, st, rescore.Options{From: "main", Reward: s}); !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("ref without iterations: %v", err)
	}
	if _, err := rescore.Run(ctx, st, rescore.Options{From: "runs-r", Branch: "main", Reward: s}); !errors.Is(err, artifacts.ErrBranchExists) {
		t.Fatalf("branch from elsewhere: %v", err)
	}
}
