package rewards_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/rewardstest"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// rewardIteration scores two prompts × four samples (sample_index 0 to 3)
// with spec through the reward task in an engine whose reward
// environment retries three times, and returns the rewards it wrote.
func rewardIteration(t *testing.T, spec string) ([]tables.Trajectory, []tables.Reward, error) {
	t.Helper()
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	var trajs []tables.Trajectory
	for _, pid := range []string{"p0", "p1"} {
		for i := range 4 {
			trajs = append(trajs, tables.Trajectory{PromptID: pid, SampleIndex: int32(i), GroupID: pid, Completion: "#### 4",
				TokenIDs: []int32{1, 2}, NumTokens: 2, FinishReason: "stop", Status: tables.StatusOK})
		}
	}
	var b bytes.Buffer
	if err := tables.Write(&b, tables.Trajectories, trajs, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutObject(ctx, "main", "data/trajectories.parquet", &b, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Commit(ctx, "main", "trajectories", nil); err != nil {
		t.Fatal(err)
	}
	prog := rewardstest.Program(t, "reward.yaml", spec)
	retry := pipeline.Settings{Retry: pipeline.Retry{Attempts: 3, Backoff: time.Millisecond}}
	run, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "r", Envs: map[string]pipeline.Settings{"": retry}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	n := run.Iteration(1).Go(ctx, rewards.Task(prog), pipeline.Call{
		Inputs: map[string]pipeline.Artifact{"trajectories": pipeline.StoreArtifact("main", "data/trajectories.parquet")},
		Params: map[string]int{"iteration": 1}})
	if err := n.Wait(ctx); err != nil {
		return trajs, nil, err
	}
	out, err := n.Result(pipeline.OutRewards)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := artifacts.ReadObject(ctx, st, out.Ref, out.Path)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := tables.Read(bytes.NewReader(raw), int64(len(raw)), out.Path, tables.Rewards)
	if err != nil {
		t.Fatal(err)
	}
	return trajs, rows, nil
}

// TestRewardTaskFailsWhenNoRewardIsFinite: a reward that is NaN or
// infinite on every row leaves nothing to train on. The reward task
// fails on its first attempt (scoring again gives the same values),
// naming the part, the first row and its value, and what to do — where
// it once committed the iteration and trained on nothing, printing
// "reward 0.000".
func TestRewardTaskFailsWhenNoRewardIsFinite(t *testing.T) {
	const next = "make every component and the total finite on every row, e.g. guard divisions and logarithms in the reward spec, and check the scores of its judges"
	tests := []struct {
		name, spec, want string
	}{
		{name: "NaN", spec: "components:\n  - name: ratio\n    expr: '0.0 / (double(sample_index) * 0.0)'\n",
			want: "no sample has a finite reward (8 of 8 are NaN or infinite; the first, prompt p0 sample 0: component ratio: the value is NaN): " + next},
		{name: "+Inf", spec: "components:\n  - name: ratio\n    expr: '1.0 / (double(sample_index) * 0.0)'\n",
			want: "no sample has a finite reward (8 of 8 are NaN or infinite; the first, prompt p0 sample 0: component ratio: the value is +Inf): " + next},
		{name: "-Inf total", spec: "components:\n  - name: one\n    expr: '1.0'\ntotal: 'one / (double(sample_index) * -0.0)'\n",
			want: "no sample has a finite reward (8 of 8 are NaN or infinite; the first, prompt p0 sample 0: total: the value is -Inf): " + next},
		{name: "weighted sum overflows", spec: "components:\n  - name: big\n    expr: '1.5e308'\n    weight: 2\n",
			want: "no sample has a finite reward (8 of 8 are NaN or infinite; the first, prompt p0 sample 0: total: the weighted sum is +Inf): " + next},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := rewardIteration(t, tt.spec)
			var te *pipeline.TaskError
			var ne *tables.NonfiniteError
			if !errors.As(err, &te) || te.Task != "reward" || te.Attempts != 1 {
				t.Fatalf("err = %v; want the reward task to fail on its first attempt", err)
			}
			if !errors.Is(err, pipeline.ErrPermanent) || !errors.Is(err, tables.ErrNoFiniteReward) || !errors.As(err, &ne) || te.Err.Error() != tt.want {
				t.Errorf("err = %v\nwant a permanent ErrNoFiniteReward: %s", te.Err, tt.want)
			}
		})
	}
}

// TestRewardTaskNonfiniteRows: a reward that is +Inf on sample 0 of each
// prompt (1/0) marks those rows nonfinite, with null components and a
// NaN total, and every consumer leaves them out: the mean reward is 2,
// over the finite rows (1, 2, 3 of each prompt), never (0+1+2+3)/4 with
// the failed row as 0; the advantages mask those rows, and the trainer's
// reward figure agrees.
func TestRewardTaskNonfiniteRows(t *testing.T) {
	trajs, rows, err := rewardIteration(t, "components:\n  - name: ratio\n    expr: 'sample_index == 0 ? 1.0 / double(sample_index) : double(sample_index)'\n")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		s := fmt.Sprintf("%s/%d %s %v", r.PromptID, r.SampleIndex, r.Status, r.Total)
		if r.Error != nil {
			s += " " + *r.Error
		}
		if _, ok := r.Components["ratio"]; !ok {
			s += " (no ratio)"
		}
		got = append(got, s)
	}
	want := []string{
		"p0/0 nonfinite NaN component ratio: the value is +Inf (no ratio)",
		"p0/1 ok 1", "p0/2 ok 2", "p0/3 ok 3",
		"p1/0 nonfinite NaN component ratio: the value is +Inf (no ratio)",
		"p1/1 ok 1", "p1/2 ok 2", "p1/3 ok 3",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rewards:\n%v\nwant:\n%v", got, want)
	}
	const wantMean = 2.0
	if mean, scored := tables.MeanTotal(rows); mean != wantMean || scored != 6 {
		t.Errorf("MeanTotal = %v over %d rows, want %v over 6", mean, scored, wantMean)
	}
	adv, st := advantages.Compute(rows, advantages.Options{})
	const groupMean = 2.0
	for i, a := range adv {
		masked := a.Mask && a.Reason == advantages.ReasonRewardStatus+tables.RewardNonfinite
		if masked != (rows[i].SampleIndex == 0) || a.GroupMean != groupMean || a.GroupSize != 3 || math.IsNaN(a.Advantage) {
			t.Errorf("advantage of %s/%d: %+v; want sample 0 masked for its status and group mean %v over 3", a.PromptID, a.SampleIndex, a, groupMean)
		}
	}
	if st.Masked != 2 || st.Groups != 2 {
		t.Errorf("advantage stats %+v, want 2 groups, 2 masked", st)
	}
	f := grpo.BatchFigures(trajs, rows, adv, st)
	if f.Reward.Mean != wantMean || f.Reward.Count != 6 || f.Errored != 2 || f.Used != 6 {
		t.Errorf("figures: reward %+v, errored %d, used %d; want the mean %v of 6 finite rows, 2 errored", f.Reward, f.Errored, f.Used, wantMean)
	}
}
