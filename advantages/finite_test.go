package advantages_test

import (
	"errors"
	"math"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// TestNonfinite: a reward that says ok with a NaN or infinite total, and
// a non-finite logprob or advantage of a sample left to train on, fail
// Join and Given with an ErrNonfinite (an ErrBatch) naming the file, its
// row counted from 1 in the file's order, the sample and the value. The
// same values on a masked sample, and a reward the reward stage marked
// nonfinite, are masked as before.
func TestNonfinite(t *testing.T) {
	ok := tables.StatusOK
	lp := func(tr tables.Trajectory, v ...float32) tables.Trajectory { tr.Logprobs = v; return tr }
	// Group a trains (rewards 1, 0); b/0 failed, so it is masked.
	trajs := func() []tables.Trajectory {
		return []tables.Trajectory{lp(traj("b", 0, tables.StatusTimeout, 3), float32(math.NaN())),
			lp(traj("a", 1, ok, 5, 6), -0.5, -0.25), lp(traj("a", 0, ok, 7), -1)}
	}
	rewards := func() []tables.Reward {
		return []tables.Reward{rew("a", 0, 1), rew("a", 1, 0),
			{PromptID: "b", SampleIndex: 0, Status: "timeout", Total: math.NaN()}}
	}
	given := func() []tables.Advantage {
		b, err := advantages.Join(trajs(), rewards(), advantages.TrainOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return b.Advantages // a/0, a/1, b/0
	}
	for _, tc := range []struct {
		name      string
		edit      func(trajs []tables.Trajectory, rewards []tables.Reward, adv []tables.Advantage) []tables.Reward
		given     bool
		estimator advantages.Estimator
		want      string // "" for none
	}{
		{name: "finite, a masked sample's NaN logprob", edit: nil},
		{name: "finite, given", given: true},
		{name: "a NaN total with status ok", edit: func(_ []tables.Trajectory, r []tables.Reward, _ []tables.Advantage) []tables.Reward {
			r[1].Total = math.NaN()
			return r
		}, want: `inconsistent training batch: a value is NaN or infinite: rewards.parquet row 2 (prompt "a", sample 1): total NaN with status ok; make the reward finite, or give the row status nonfinite so that it is masked, and rescore the iteration (rlpipe rescore --reward)`},
		{name: "an infinite total with status ok, given", given: true, edit: func(_ []tables.Trajectory, r []tables.Reward, _ []tables.Advantage) []tables.Reward {
			r[0].Total = math.Inf(-1)
			return r
		}, want: `inconsistent training batch: a value is NaN or infinite: rewards.parquet row 1 (prompt "a", sample 0): total -Inf with status ok; make the reward finite, or give the row status nonfinite so that it is masked, and rescore the iteration (rlpipe rescore --reward)`},
		{name: "a reward said nonfinite is masked", edit: func(_ []tables.Trajectory, r []tables.Reward, _ []tables.Advantage) []tables.Reward {
			r[1].Status, r[1].Total = tables.RewardNonfinite, math.Inf(1)
			return r
		}},
		{name: "a NaN logprob of a trained sample", edit: func(tr []tables.Trajectory, r []tables.Reward, _ []tables.Advantage) []tables.Reward {
			tr[1].Logprobs[1] = float32(math.NaN())
			return r
		}, want: `inconsistent training batch: a value is NaN or infinite: trajectories.parquet row 2 (prompt "a", sample 1): logprob 2 of 2 is NaN; a sampled token's logprob must be a number: check the policy server's logprobs`},
		{name: "a -Inf logprob, given", given: true, edit: func(tr []tables.Trajectory, r []tables.Reward, _ []tables.Advantage) []tables.Reward {
			tr[2].Logprobs[0] = float32(math.Inf(-1))
			return r
		}, want: `inconsistent training batch: a value is NaN or infinite: trajectories.parquet row 3 (prompt "a", sample 0): logprob 1 of 1 is -Inf; a sampled token's logprob must be a number: check the policy server's logprobs`},
		{name: "an infinite advantage, given", given: true, edit: func(_ []tables.Trajectory, r []tables.Reward, adv []tables.Advantage) []tables.Reward {
			adv[1].Advantage = math.Inf(1)
			return r
		}, want: `inconsistent training batch: a value is NaN or infinite: advantages.parquet row 2 (prompt "a", sample 1): advantage +Inf is not masked; recompute the table (the loop's advantages step writes finite ones)`},
		{name: "a masked NaN advantage, given", given: true, edit: func(_ []tables.Trajectory, r []tables.Reward, adv []tables.Advantage) []tables.Reward {
			adv[2].Advantage = math.NaN()
			return r
		}},
		{name: "an estimator that gives NaN", estimator: nanEstimator{},
			want: `inconsistent training batch: a value is NaN or infinite: estimator nan gave prompt "a" sample 1 the advantage NaN (its group's rewards in rewards.parquet: mean 0.5, std 0.7071067811865476); check the estimator and the rewards`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, r, adv := trajs(), rewards(), given()
			if tc.edit != nil {
				r = tc.edit(tr, r, adv)
			}
			var err error
			if tc.given {
				_, err = advantages.Given(tr, r, adv)
			} else {
				_, err = advantages.Join(tr, r, advantages.TrainOptions{Options: advantages.Options{Estimator: tc.estimator}})
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("err = %v, want none", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want || !errors.Is(err, advantages.ErrNonfinite) || !errors.Is(err, advantages.ErrBatch)):
				t.Fatalf("err = %v\nwant the ErrNonfinite %s", err, tc.want)
			}
		})
	}
}

// nanEstimator gives every sample NaN: an estimator with a bug.
type nanEstimator struct{}

func (nanEstimator) Name() string { return "nan" }
func (nanEstimator) Group(r []float64, _, _ float64, _ advantages.Options) []float64 {
	out := make([]float64, len(r))
	for i := range out {
		out[i] = math.NaN()
	}
	return out
}
