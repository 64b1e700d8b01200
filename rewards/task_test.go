package rewards_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/rescore"
)

// evenSpec rewards even numbers, as a verifier judges them.
const evenSpec = `verifiers:
  - name: even
components:
  - name: even
    expr: 'verifiers.even.passed ? 1.0 : 0.0'
    weight: 1.0
`

// iterationsStore is a store whose branch runs-r holds n iterations of k
// trajectories each, the completions the numbers 0 to n·k-1, and their
// old rewards, all 0.
func iterationsStore(t *testing.T, n, k int) artifacts.Store {
	t.Helper()
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	if _, err := st.CreateBranch(ctx, "runs-r", "main"); err != nil {
		t.Fatal(err)
	}
	for it := 1; it <= n; it++ {
		var trajs []tables.Trajectory
		var old []tables.Reward
		for i := 0; i < k; i++ {
			id := fmt.Sprint("p", it)
			trajs = append(trajs, tables.Trajectory{PromptID: id, SampleIndex: int32(i), Completion: strconv.Itoa((it-1)*k + i), Status: tables.StatusOK})
			old = append(old, tables.Reward{PromptID: id, SampleIndex: int32(i), Status: tables.StatusOK})
		}
		dir := fmt.Sprintf("iterations/%06d/", it)
		put(t, st, dir+"trajectories.parquet", tables.Trajectories, trajs)
		put(t, st, dir+"rewards.parquet", tables.Rewards, old)
	}
	if _, err := st.Commit(ctx, "runs-r", "iterations", nil); err != nil {
		t.Fatal(err)
	}
	return st
}

// put writes rows as a table to runs-r:path.
func put[T any](t *testing.T, st artifacts.Store, path string, table *tables.Table[T], rows []T) {
	t.Helper()
	var b bytes.Buffer
	if err := tables.Write(&b, table, rows, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutObject(context.Background(), "runs-r", path, &b, nil); err != nil {
		t.Fatal(err)
	}
}

// TestRescoreCompilesOnce: rescoring three iterations, again without the
// task cache, and a third time compiles the spec once, where a program
// bound to each task call would compile it once per iteration. The
// verifier gets each task call's context as its memoizer, so the second
// rescoring replays all twelve verdicts instead of checking again.
func TestRescoreCompilesOnce(t *testing.T) {
	ctx := context.Background()
	st := iterationsStore(t, 3, 4)
	var checks atomic.Int64
	even := func(ctx context.Context, r rewards.Row, memo rewards.Memoizer) (rewards.VerifierResult, error) {
		if _, ok := memo.(*pipeline.TaskContext); !ok {
			return rewards.VerifierResult{}, fmt.Errorf("memoizer %T, want the task call's *pipeline.TaskContext", memo)
		}
		var out rewards.VerifierResult
		err := memo.Memo(ctx, map[string]string{"even": r.Trajectory.Completion}, &out, func(context.Context) (any, error) {
			checks.Add(1)
			n, err := strconv.Atoi(r.Trajectory.Completion)
			return rewards.VerifierResult{Passed: n%2 == 0, Status: "ok"}, err
		})
		return out, err
	}
	spec, err := rewards.ParseSpec("even.yaml", []byte(evenSpec))
	if err != nil {
		t.Fatal(err)
	}

	before := rewards.Compilations()
	prog, err := rewards.Compile(spec, rewards.WithVerifier("even", even))
	if err != nil {
		t.Fatal(err)
	}
	var reps []tables.RescoreReport
	for _, noCache := range []bool{false, true, false} {
		rep, err := rescore.Run(ctx, st, rescore.Options{From: "runs-r", Branch: "even", Reward: prog, NoCache: noCache})
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, rep)
	}
	if n := rewards.Compilations() - before; n != 1 {
		t.Errorf("compiled %d times over 3 rescorings of 3 iterations, want 1", n)
	}
	if n := checks.Load(); n != 12 {
		t.Errorf("the verifier checked %d times, want 12: once per trajectory, replayed after", n)
	}
	// The even completions 0, 2, … 10 move from 0 to 1.
	var got []string
	for _, rep := range reps {
		c := rep.Comparison
		got = append(got, fmt.Sprintf("%v: %d cached, %d scored, %d changed, %s mean %g", rep.Iterations, rep.Cached, c.Scored, c.Changed, c.Components[0].Name, c.Components[0].New.Mean))
	}
	want := "[[1 2 3]: 0 cached, 12 scored, 6 changed, even mean 0.5 [1 2 3]: 0 cached, 12 scored, 6 changed, even mean 0.5 [1 2 3]: 3 cached, 12 scored, 6 changed, even mean 0.5]"
	if fmt.Sprint(got) != want {
		t.Errorf("rescorings:\n%v\nwant\n%s", got, want)
	}
}

// TestTaskVersion: the reward task's version is the spec digest, spelled
// as before programs were compiled once, so results cached and memoized
// by earlier runs still hit.
func TestTaskVersion(t *testing.T) {
	spec, err := rewards.ParseSpec("even.yaml", []byte(evenSpec))
	if err != nil {
		t.Fatal(err)
	}
	prog, err := rewards.Compile(spec, rewards.WithVerifier("even", func(context.Context, rewards.Row, rewards.Memoizer) (rewards.VerifierResult, error) {
		return rewards.VerifierResult{}, errors.New("not called")
	}))
	if err != nil {
		t.Fatal(err)
	}
	task := rewards.Task(prog)
	got := fmt.Sprint(task.Name, " ", task.Version, " ", task.Deterministic, " ", task.Outputs[0].Name, " ", task.Outputs[0].File)
	if want := "reward cel-972166dc50db75c302197964640809a080aa1f11ef619d25939960fb3dc5c9ac true rewards rewards.parquet"; got != want {
		t.Fatalf("task = %s, want %s", got, want)
	}
}

// TestTaskBookkeeping: a spec of expressions alone makes the reward task
// bookkeeping (the run scores in its own process whatever its executor);
// a spec with a verifier sends it to the reward environment's workers.
func TestTaskBookkeeping(t *testing.T) {
	plain, err := rewards.ParseSpec("plain.yaml", []byte("components:\n  - name: correct\n    expr: 'completion == answer ? 1.0 : 0.0'\n"))
	if err != nil {
		t.Fatal(err)
	}
	prog, err := rewards.Compile(plain)
	if err != nil {
		t.Fatal(err)
	}
	if !prog.ExpressionsOnly() || !rewards.Task(prog).Bookkeeping {
		t.Errorf("expressions alone: ExpressionsOnly %v, Bookkeeping %v; want both true", prog.ExpressionsOnly(), rewards.Task(prog).Bookkeeping)
	}
	spec, err := rewards.ParseSpec("even.yaml", []byte(evenSpec))
	if err != nil {
		t.Fatal(err)
	}
	prog, err = rewards.Compile(spec, rewards.WithVerifier("even", func(context.Context, rewards.Row, rewards.Memoizer) (rewards.VerifierResult, error) {
		return rewards.VerifierResult{}, errors.New("not called")
	}))
	if err != nil {
		t.Fatal(err)
	}
	if prog.ExpressionsOnly() || rewards.Task(prog).Bookkeeping {
		t.Errorf("with a verifier: ExpressionsOnly %v, Bookkeeping %v; want both false", prog.ExpressionsOnly(), rewards.Task(prog).Bookkeeping)
	}
}
