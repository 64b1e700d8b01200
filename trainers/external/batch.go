package external

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// Metrics are the batch's figures, computed by rlpipe from the tables
// before the trainer runs. They are the base of the metrics output: every
// key the trainer's metrics file holds is laid over them, so a trainer
// that writes only its step figures (loss, kl, grad_norm, …) still gets
// the reward and group figures the embedded trainer reports, under the
// same names.
type Metrics struct {
	Iteration int `json:"iteration"`
	// Figures: rewards per component, groups, samples used (those the
	// advantages table leaves unmasked; a trainer that skips more
	// overrides it), masked and errored, response lengths, staleness.
	grpo.Figures
}

type sampleKey struct {
	prompt string
	index  int32
}

// prepare joins an iteration's tables into the advantages table (one row
// per trajectory, in (prompt id, sample index) order) and the batch's
// metrics. A trajectory that failed or has no reward is masked and stays
// out of its group's statistics: it is never trained on as a reward of 0.
func prepare(prompts []tables.Prompt, trajs []tables.Trajectory, rewards []tables.Reward, o advantageOptions) ([]tables.Advantage, Metrics, error) {
	trajs = slices.Clone(trajs)
	slices.SortFunc(trajs, func(x, y tables.Trajectory) int {
		return cmp.Or(strings.Compare(x.PromptID, y.PromptID), cmp.Compare(x.SampleIndex, y.SampleIndex))
	})
	at := make(map[sampleKey]int, len(trajs))
	for i, t := range trajs {
		k := sampleKey{t.PromptID, t.SampleIndex}
		if _, dup := at[k]; dup {
			return nil, Metrics{}, fmt.Errorf("%w: trajectories hold sample %d of prompt %q twice", ErrBatch, t.SampleIndex, t.PromptID)
		}
		at[k] = i
	}
	scored := make([]tables.Reward, len(trajs))
	have := make([]bool, len(trajs))
	for _, r := range rewards {
		i, ok := at[sampleKey{r.PromptID, r.SampleIndex}]
		if !ok {
			return nil, Metrics{}, fmt.Errorf("%w: a reward scores sample %d of prompt %q, which the trajectories do not hold", ErrBatch, r.SampleIndex, r.PromptID)
		}
		if have[i] {
			return nil, Metrics{}, fmt.Errorf("%w: rewards score sample %d of prompt %q twice", ErrBatch, r.SampleIndex, r.PromptID)
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
	known := make(map[string]bool, len(prompts))
	for _, p := range prompts {
		known[p.PromptID] = true
	}
	adv, st := advantages.Compute(scored, advantages.Options{NoStd: o.NoStd})
	for i, t := range trajs {
		a := &adv[i]
		switch {
		case !have[i]:
			a.Reason = advantages.ReasonNoReward
		case t.Status != tables.StatusOK:
			a.Reason = advantages.ReasonTrajectory + t.Status
		}
		if a.Mask {
			continue
		}
		switch {
		case a.GroupStd == 0 && !o.KeepZeroStd:
			a.Mask, a.Reason, a.Advantage = true, advantages.ReasonZeroStd, 0
		case len(t.TokenIDs) == 0:
			a.Mask, a.Reason, a.Advantage = true, advantages.ReasonNoTokens, 0
		case !known[t.PromptID]:
			return nil, Metrics{}, fmt.Errorf("%w: sample %d of prompt %q has no row in the prompts table", ErrBatch, t.SampleIndex, t.PromptID)
		}
	}
	return adv, batchMetrics(trajs, scored, adv, st), nil
}

func batchMetrics(trajs []tables.Trajectory, scored []tables.Reward, adv []tables.Advantage, st advantages.Stats) Metrics {
	return Metrics{Figures: grpo.BatchFigures(trajs, scored, adv, st)}
}
