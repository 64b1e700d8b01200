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

// ErrRows: advantages given to Given do not fit the trajectories. It is
// an ErrBatch; a trainer that read them from a file names the file.
var ErrRows = fmt.Errorf("%w: the advantages do not fit the trajectories", ErrBatch)

// TrainOptions shape the advantages a trainer trains on.
type TrainOptions struct {
	Options
	// KeepZeroStd keeps the samples of groups whose scored rewards are
	// all equal (their advantage is 0); by default they are masked with
	// ReasonZeroStd, as DAPO's dynamic sampling drops them.
	KeepZeroStd bool
	// MaskTruncated masks the samples whose finish reason is "length"
	// (ReasonTruncated): DAPO's overlong filtering, TRL's
	// mask_truncated_completions. They still count in their group's
	// mean and std, as in TRL, and only leave the loss.
	MaskTruncated bool
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
// zero-variance group's samples as ReasonZeroStd (unless KeepZeroStd or
// the estimator is a CriticEstimator),
// samples without token ids as ReasonNoTokens and episodes without an
// exact token sequence as ReasonNoSequence. A failed or unscored sample
// stays out of its group's statistics: a failed rollout is never trained
// on as a reward of 0. With MaskTruncated a scored sample that stopped at
// the length limit is masked as ReasonTruncated (before the other
// reasons) but keeps its reward in its group's mean and std, as TRL's
// mask_truncated_completions does: it leaves the loss only. A sample that
// appears twice, or a reward for a sample the trajectories do not hold,
// is an ErrBatch; a reward with status ok and a NaN or infinite total, a
// non-finite logprob or advantage of a sample left to train on, an
// ErrNonfinite.
func Join(in []tables.Trajectory, rewards []tables.Reward, o TrainOptions) (Batch, error) {
	m, err := match(in, rewards)
	if err != nil {
		return Batch{}, err
	}
	trajs, scored, have := m.trajs, m.scored, m.have
	adv, st := Compute(scored, o.Options)
	keepZeroStd := o.KeepZeroStd || NeedsCritic(o.estimator())
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
		case o.MaskTruncated && t.FinishReason == FinishLength:
			a.Mask, a.Reason, a.Advantage = true, ReasonTruncated, 0
		case a.GroupStd == 0 && !keepZeroStd:
			a.Mask, a.Reason, a.Advantage = true, ReasonZeroStd, 0
		case len(t.TokenIDs) == 0:
			a.Mask, a.Reason, a.Advantage = true, ReasonNoTokens, 0
		case t.IsEpisode() && t.Sequence == nil:
			a.Mask, a.Reason, a.Advantage = true, ReasonNoSequence, 0
		}
	}
	if err := finiteTrained(in, m, adv, nil, o.estimator()); err != nil {
		return Batch{}, err
	}
	return Batch{Trajectories: trajs, Scored: scored, Advantages: adv, Stats: st}, nil
}

// sampleKey names one sample of one prompt.
type sampleKey struct {
	prompt string
	index  int32
}

// matched are an iteration's trajectories sorted by (prompt id, sample
// index) with the rewards lined up: scored[i] is the reward of trajs[i]
// (a "missing" one when have[i] is false), with the status of a failed
// trajectory ("trajectory timeout") in place of the reward's; at[k] is
// the index of sample k.
type matched struct {
	trajs  []tables.Trajectory
	scored []tables.Reward
	have   []bool
	at     map[sampleKey]int
}

// match lines the rewards up with the trajectories, then checks that
// every reward with status ok has a finite total (finiteRewards): the
// checks of the tables that Join and Given both start with, in that
// order.
func match(trajs []tables.Trajectory, rewards []tables.Reward) (matched, error) {
	trajs = slices.Clone(trajs)
	slices.SortFunc(trajs, func(x, y tables.Trajectory) int {
		return cmp.Or(strings.Compare(x.PromptID, y.PromptID), cmp.Compare(x.SampleIndex, y.SampleIndex))
	})
	at := make(map[sampleKey]int, len(trajs))
	for i, t := range trajs {
		k := sampleKey{t.PromptID, t.SampleIndex}
		if _, dup := at[k]; dup {
			return matched{}, fmt.Errorf("%w: trajectories hold sample %d of prompt %q twice", ErrBatch, t.SampleIndex, t.PromptID)
		}
		at[k] = i
	}
	scored := make([]tables.Reward, len(trajs))
	have := make([]bool, len(trajs))
	for _, r := range rewards {
		i, ok := at[sampleKey{r.PromptID, r.SampleIndex}]
		if !ok {
			return matched{}, fmt.Errorf("%w: a reward scores sample %d of prompt %q, which the trajectories do not hold", ErrBatch, r.SampleIndex, r.PromptID)
		}
		if have[i] {
			return matched{}, fmt.Errorf("%w: rewards score sample %d of prompt %q twice", ErrBatch, r.SampleIndex, r.PromptID)
		}
		scored[i], have[i] = r, true
	}
	if err := finiteRewards(rewards); err != nil {
		return matched{}, err
	}
	for i, t := range trajs {
		switch {
		case !have[i]:
			scored[i] = tables.Reward{PromptID: t.PromptID, SampleIndex: t.SampleIndex, Status: "missing", Total: math.NaN()}
		case t.Status != tables.StatusOK:
			scored[i].Status = "trajectory " + t.Status
		}
	}
	return matched{trajs: trajs, scored: scored, have: have, at: at}, nil
}

// Given is Join with the advantages read back instead of computed: rows
// are an advantages table that Join wrote for these trajectories and
// rewards (TrainTask's output), one row per trajectory, matched to it by
// prompt id and sample index in any order. The batch is Join's, row for
// row, masks and reasons included: Stats are recounted from the rows'
// group columns. A row for a sample the trajectories do not hold, a
// sample with no row or two, and an unmasked row for a sample no trainer
// can learn from (failed, unscored, without token ids) are an ErrRows
// naming the row, counted from 1 in the table's order; non-finite values
// are an ErrNonfinite, as for Join, naming the advantages table's row for
// an advantage.
func Given(in []tables.Trajectory, rewards []tables.Reward, rows []tables.Advantage) (Batch, error) {
	m, err := match(in, rewards)
	if err != nil {
		return Batch{}, err
	}
	trajs, scored, at := m.trajs, m.scored, m.at
	adv := make([]tables.Advantage, len(trajs))
	row := make([]int, len(trajs)) // 1-based row of each trajectory's advantage, 0: none yet
	for r, a := range rows {
		i, ok := at[sampleKey{a.PromptID, a.SampleIndex}]
		switch {
		case !ok:
			return Batch{}, fmt.Errorf("%w: row %d is sample %d of prompt %q, which the trajectories do not hold", ErrRows, r+1, a.SampleIndex, a.PromptID)
		case row[i] != 0:
			return Batch{}, fmt.Errorf("%w: row %d is sample %d of prompt %q again (row %d was)", ErrRows, r+1, a.SampleIndex, a.PromptID, row[i])
		case !a.Mask && (!scored[i].Scored() || len(trajs[i].TokenIDs) == 0):
			why := "has no token ids"
			if !scored[i].Scored() {
				why = "is not scored (status " + scored[i].Outcome() + ")"
			}
			return Batch{}, fmt.Errorf("%w: row %d trains on sample %d of prompt %q, which %s", ErrRows, r+1, a.SampleIndex, a.PromptID, why)
		}
		adv[i], row[i] = a, r+1
	}
	for i, t := range trajs {
		if row[i] == 0 {
			return Batch{}, fmt.Errorf("%w: none of the %d rows is sample %d of prompt %q", ErrRows, len(rows), t.SampleIndex, t.PromptID)
		}
	}
	if err := finiteTrained(in, m, adv, row, nil); err != nil {
		return Batch{}, err
	}
	return Batch{Trajectories: trajs, Scored: scored, Advantages: adv, Stats: statsOf(scored, adv)}, nil
}

// statsOf recounts Compute's Stats from its rows: the group columns are
// the same on every row of a group, and Compute masks exactly the samples
// that are not scored or whose group has fewer than two scored samples.
func statsOf(scored []tables.Reward, adv []tables.Advantage) Stats {
	var st Stats
	seen := map[string]bool{}
	for i, a := range adv {
		if !seen[a.PromptID] {
			seen[a.PromptID] = true
			st.Groups++
			if a.GroupSize >= 2 {
				st.MultiSample++
				if a.GroupStd == 0 {
					st.ZeroStd++
				}
			}
		}
		if !scored[i].Scored() || a.GroupSize < 2 {
			st.Masked++
		}
	}
	return st
}

// Train is the batch a trainer trains on: Given's when the loop's
// advantages step wrote rows (not nil), else Join's with o.
func Train(trajs []tables.Trajectory, rewards []tables.Reward, rows []tables.Advantage, o TrainOptions) (Batch, error) {
	if rows != nil {
		return Given(trajs, rewards, rows)
	}
	return Join(trajs, rewards, o)
}
