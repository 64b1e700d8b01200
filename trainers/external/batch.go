package external

import (
	"fmt"

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

// prepare joins an iteration's tables into the advantages table (one row
// per trajectory, in (prompt id, sample index) order, see
// advantages.Join) and the batch's metrics; given, when not nil, are the
// advantages the loop's advantages step wrote, taken as they are
// (advantages.Given). A trajectory that failed or has no reward is masked
// and stays out of its group's statistics: it is never trained on as a
// reward of 0.
func prepare(prompts []tables.Prompt, trajs []tables.Trajectory, rewards []tables.Reward, given []tables.Advantage, o advantages.TrainOptions) ([]tables.Advantage, Metrics, error) {
	j, err := advantages.Train(trajs, rewards, given, o)
	if err != nil {
		return nil, Metrics{}, err
	}
	known := make(map[string]bool, len(prompts))
	for _, p := range prompts {
		known[p.PromptID] = true
	}
	for i, t := range j.Trajectories {
		if !j.Advantages[i].Mask && !known[t.PromptID] {
			return nil, Metrics{}, fmt.Errorf("%w: sample %d of prompt %q has no row in the prompts table", ErrBatch, t.SampleIndex, t.PromptID)
		}
	}
	return j.Advantages, batchMetrics(j.Trajectories, j.Scored, j.Advantages, j.Stats), nil
}

func batchMetrics(trajs []tables.Trajectory, scored []tables.Reward, adv []tables.Advantage, st advantages.Stats) Metrics {
	return Metrics{Figures: grpo.BatchFigures(trajs, scored, adv, st)}
}
