package external

import (
	"errors"
	"math"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// TestPrepareRefusesNonfiniteValues: the tables handed to the trainer are
// checked first: a reward total that says ok but is infinite, or a NaN
// logprob of a sample it would train on, fails prepare with
// advantages.ErrNonfinite (an ErrBatch, so the call fails permanently)
// naming the file, the row and the sample.
func TestPrepareRefusesNonfiniteValues(t *testing.T) {
	ok := tables.StatusOK
	traj := func(p string, i int32, lps ...float32) tables.Trajectory {
		toks := make([]int32, len(lps))
		return tables.Trajectory{PromptID: p, SampleIndex: i, Status: ok, TokenIDs: toks, Logprobs: lps, NumTokens: int32(len(toks)), FinishReason: "stop"}
	}
	rew := func(p string, i int32, v float64) tables.Reward {
		return tables.Reward{PromptID: p, SampleIndex: i, Total: v, Status: ok}
	}
	prompts := []tables.Prompt{{PromptID: "a"}}
	const prefix = "inconsistent training batch: a value is NaN or infinite: "
	for _, tc := range []struct {
		name    string
		trajs   []tables.Trajectory
		rewards []tables.Reward
		want    string
	}{
		{"finite", []tables.Trajectory{traj("a", 0, -1), traj("a", 1, -2, -3)}, []tables.Reward{rew("a", 0, 1), rew("a", 1, 0)}, ""},
		{"an infinite total with status ok", []tables.Trajectory{traj("a", 0, -1), traj("a", 1, -2, -3)}, []tables.Reward{rew("a", 0, 1), rew("a", 1, math.Inf(1))},
			prefix + `rewards.parquet row 2 (prompt "a", sample 1): total +Inf with status ok; make the reward finite, or give the row status nonfinite so that it is masked, and rescore the iteration (rlpipe rescore --reward)`},
		{"a NaN logprob", []tables.Trajectory{traj("a", 1, -2, float32(math.NaN())), traj("a", 0, -1)}, []tables.Reward{rew("a", 0, 1), rew("a", 1, 0)},
			prefix + `trajectories.parquet row 1 (prompt "a", sample 1): logprob 2 of 2 is NaN; a sampled token's logprob must be a number: check the policy server's logprobs`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := prepare(prompts, tc.trajs, tc.rewards, nil, advantages.TrainOptions{})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("err = %v, want none", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want || !errors.Is(err, advantages.ErrNonfinite) || !errors.Is(err, ErrBatch)):
				t.Fatalf("err = %v\nwant the ErrNonfinite %s", err, tc.want)
			}
		})
	}
}
