package advantages

import (
	"fmt"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// ErrNonfinite: a value a trainer would use is NaN or infinite: the total
// of a reward whose status says ok, the logprob of a sample it trains on,
// or the advantage of one. It is an ErrBatch, so the advantages step and
// both trainers fail permanently (the same tables fail the same way); the
// message names the file, the row (counted from 1 in the file's order),
// the sample and the value. A reward the reward stage scored status
// nonfinite is not this error: it is masked like any other failed reward
// (ReasonRewardStatus).
var ErrNonfinite = fmt.Errorf("%w: a value is NaN or infinite", ErrBatch)

// finiteRewards fails on the first reward row (in the file's order) whose
// status is ok and whose total is not finite: a table that says a sample
// was scored but holds no number for it.
func finiteRewards(rewards []tables.Reward) error {
	for r, w := range rewards {
		if w.Status == tables.StatusOK && !tables.Finite(w.Total) {
			return fmt.Errorf("%w: %s row %d (prompt %q, sample %d): total %v with status ok; make the reward finite, or give the row status %s so that it is masked, and rescore the iteration (rlpipe rescore --reward)",
				ErrNonfinite, runs.RewardsFile, r+1, w.PromptID, w.SampleIndex, w.Total, tables.RewardNonfinite)
		}
	}
	return nil
}

// finiteTrained fails on the first trajectory (in trajs' order, the
// file's) that b trains on whose logprobs or advantage are not finite.
// given holds the 1-based row of each of b's advantages in the
// advantages table they were read from (Given), nil when Join computed
// them from the rewards with estimator e.
func finiteTrained(trajs []tables.Trajectory, m matched, b []tables.Advantage, given []int, e Estimator) error {
	for r, t := range trajs {
		i := m.at[sampleKey{t.PromptID, t.SampleIndex}]
		a := b[i]
		if a.Mask {
			continue
		}
		for k, lp := range t.Logprobs {
			if v := float64(lp); !tables.Finite(v) {
				return fmt.Errorf("%w: %s row %d (prompt %q, sample %d): logprob %d of %d is %v; a sampled token's logprob must be a number: check the policy server's logprobs",
					ErrNonfinite, runs.TrajectoriesFile, r+1, t.PromptID, t.SampleIndex, k+1, len(t.Logprobs), v)
			}
		}
		if tables.Finite(a.Advantage) {
			continue
		}
		if given != nil {
			return fmt.Errorf("%w: %s row %d (prompt %q, sample %d): advantage %v is not masked; recompute the table (the loop's advantages step writes finite ones)",
				ErrNonfinite, runs.AdvantagesFile, given[i], t.PromptID, t.SampleIndex, a.Advantage)
		}
		return fmt.Errorf("%w: estimator %s gave prompt %q sample %d the advantage %v (its group's rewards in %s: mean %v, std %v); check the estimator and the rewards",
			ErrNonfinite, e.Name(), t.PromptID, t.SampleIndex, a.Advantage, runs.RewardsFile, a.GroupMean, a.GroupStd)
	}
	return nil
}
