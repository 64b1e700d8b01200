package advantages

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// ErrBatch: an iteration's trajectories and rewards do not fit together
// (a sample generated twice, a reward for a sample that was never
// generated). The trainers' ErrBatch is this error.
var ErrBatch = errors.New("inconsistent training batch")

// TrainOptions shape the advantages a trainer trains on.
type TrainOptions struct {
	Options
	// KeepZeroStd keeps the samples of groups whose scored rewards are
	// all equal (their advantage is 0); by default they are masked with
	// ReasonZeroStd, as DAPO's dynamic sampling drops them.
	KeepZeroStd bool
}

// Batch is an iteration's trajectories joined with their rewards and
// advantages, row for row, in (prompt id, sample index) order.
type Batch struct {
	Trajectories []tables.Trajectory
	// Scored are the rewards, with the status of a failed trajectory
	// ("trajectory timeout") or of a missing reward ("missing") not ok.
	Scored     []tables.Reward
	Advantages []tables.Advantage
	Stats      Stats
}

// Join matches rewards to trajectories by prompt id and sample index and
// computes the advantages a trainer trains on: those of Compute over the
// scored samples, with a failed trajectory masked as ReasonTrajectory, a
// sample without a reward as ReasonNoReward, and, among the rest, a
// zero-variance group's samples as ReasonZeroStd (unless KeepZeroStd) and
// samples without token ids as ReasonNoTokens. Such samples stay out of
// their group's statistics: a failed rollout is never trained on as a
// reward of 0. A sample that appears twice, or a reward for a sample the
// trajectories do not hold, is an ErrBatch.
func Join(trajs []tables.Trajectory, rewards []tables.Reward, o TrainOptions) (Batch, error) {
	trajs = slices.Clone(trajs)
	slices.SortFunc(trajs, func(x, y tables.Trajectory) int {
		return cmp.Or(strings.Compare(x.PromptID, y.PromptID), cmp.Compare(x.SampleIndex, y.SampleIndex))
	})
	type sampleKey struct {
		prompt string
		index  int32
	}
	at := make(map[sampleKey]int, len(trajs))
	for i, t := range trajs {
		k := sampleKey{t.PromptID, t.SampleIndex}
		if _, dup := at[k]; dup {
			return Batch{}, fmt.Errorf("%w: trajectories hold sample %d of prompt %q twice", ErrBatch, t.SampleIndex, t.PromptID)
		}
		at[k] = i
	}
	scored := make([]tables.Reward, len(trajs))
	have := make([]bool, len(trajs))
	for _, r := range rewards {
		i, ok := at[sampleKey{r.PromptID, r.SampleIndex}]
		if !ok {
			return Batch{}, fmt.Errorf("%w: a reward scores sample %d of prompt %q, which the trajectories do not hold", ErrBatch, r.SampleIndex, r.PromptID)
		}
		if have[i] {
			return Batch{}, fmt.Errorf("%w: rewards score sample %d of prompt %q twice", ErrBatch, r.SampleIndex, r.PromptID)
		}
		scored[i], have[i] = r, true
	}
	for i, t := range trajs {
		switch {
		case !have[i]:
			scored[i] = tables.Reward{PromptID: t.PromptID, SampleIndex: t.SampleIndex, Status: "missing", Total: math.NaN()}
		case t.Status != tables.StatusOK:
			scored[i].Status = "trajectory " + t.Status
		}
	}
	adv, st := Compute(scored, o.Options)
	for i, t := range trajs {
		a := &adv[i]
		switch {
		case !have[i]:
			a.Reason = ReasonNoReward
		case t.Status != tables.StatusOK:
			a.Reason = ReasonTrajectory + t.Status
		}
		if a.Mask {
			continue
		}
		switch {
		case a.GroupStd == 0 && !o.KeepZeroStd:
			a.Mask, a.Reason, a.Advantage = true, ReasonZeroStd, 0
		case len(t.TokenIDs) == 0:
			a.Mask, a.Reason, a.Advantage = true, ReasonNoTokens, 0
		}
	}
	return Batch{Trajectories: trajs, Scored: scored, Advantages: adv, Stats: st}, nil
}
