package advantages

import (
	"context"
	"fmt"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
)

// OutAdvantages is the output of Task and of TrainTask.
const OutAdvantages = pipeline.OutAdvantages

// Task is the engine task that computes an iteration's advantages as
// runs did before the advantages step (GRPO with the population std, the
// default then): input "rewards" (rewards.parquet), output "advantages"
// (advantages.parquet), one row per reward row in the same order.
// Rescoring runs it on the tables its version ("advantages", "grpo-1")
// names, so it keeps computing what they hold.
func Task() *pipeline.Task {
	return &pipeline.Task{
		Name: "advantages", Version: "grpo-1", Deterministic: true,
		Outputs: []pipeline.Output{{Name: OutAdvantages, File: runs.AdvantagesFile}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			rows, err := pipeline.ReadInput(tc, pipeline.OutRewards, tables.Rewards)
			if err != nil {
				return err
			}
			adv, _ := Compute(rows, Options{PopulationStd: true})
			return tables.WriteFile(tc.OutputPath(OutAdvantages), tables.Advantages, adv, nil)
		},
	}
}

// TrainVersion names the code of TrainTask: change it when the rows Join
// writes for the same inputs and options change.
const TrainVersion = "join-2"

// sampleStdOption is how a version says the sample std (Options
// without PopulationStd). A version without it is the population std's:
// the versions of the runs before the default flipped read back as what
// they computed, and a run that sets std: population keeps their cache
// keys.
const sampleStdOption = "std=sample"

// maskTruncatedOption is how a version says TrainOptions.MaskTruncated
// (the advantages section's mask_truncated_completions: true).
const maskTruncatedOption = "mask_truncated_completions=true"

// trainVersions are the TrainVersions ParseVersion reads: join-1 wrote the
// same rows as join-2 but for an episode without an exact token sequence,
// which no trainer took then (they refused episodes), so its options
// recompute the same advantages.
var trainVersions = []string{TrainVersion, "join-1"}

// Version is TrainTask's Version for o: TrainVersion and the options,
// defaults applied ("join-2 epsilon=1e-06 no_std=false
// keep_zero_std=false"), then " std=sample" unless PopulationStd,
// " estimator=NAME" for an estimator other than GRPO, for a
// CriticEstimator " gamma=G lambda=L", then
// " mask_truncated_completions=true" with MaskTruncated, so that a change
// of options misses the cache.
func (o TrainOptions) Version() string {
	eps := o.Epsilon
	if eps == 0 {
		eps = 1e-6
	}
	v := fmt.Sprintf("%s epsilon=%g no_std=%t keep_zero_std=%t", TrainVersion, eps, o.NoStd, o.KeepZeroStd)
	if !o.PopulationStd {
		// The sample std, the default since issue 36, is named; the
		// population std is not, so that its versions (and cache keys)
		// are those written when it was the default.
		v += " " + sampleStdOption
	}
	if e := o.estimator(); e.Name() != GRPO.Name() {
		// GRPO's versions name no estimator: the cache keys of the runs
		// before estimators were values stay the same.
		v += " estimator=" + e.Name()
	}
	if NeedsCritic(o.estimator()) {
		v += fmt.Sprintf(" gamma=%g lambda=%g", o.Gamma, o.Lambda)
	}
	if o.MaskTruncated {
		// Last, and only when set: the versions without it are those
		// written before the option.
		v += " " + maskTruncatedOption
	}
	return v
}

// ParseVersion reads back the options a TrainTask ran with from its
// Version (recorded as the rlpipe-task-version of every advantages table
// it wrote), so that advantages recomputed later (a rescoring) are the
// ones the run's trainer computed. A version that names an estimator
// other than GRPO needs it among known.
func ParseVersion(v string, known ...Estimator) (TrainOptions, error) {
	var o TrainOptions
	var code, rest string
	for _, c := range trainVersions {
		if r, ok := strings.CutPrefix(v, c+" "); ok {
			code, rest = c, r
			break
		}
	}
	if code == "" {
		return o, fmt.Errorf("advantages task version %q: want %q followed by the options", v, TrainVersion)
	}
	if r, ok := strings.CutSuffix(rest, " "+maskTruncatedOption); ok {
		rest, o.MaskTruncated = r, true
	}
	if r, name, ok := strings.Cut(rest, " estimator="); ok {
		if n, gl, ok := strings.Cut(name, " gamma="); ok {
			if _, err := fmt.Sscanf(gl, "%g lambda=%g", &o.Gamma, &o.Lambda); err != nil {
				return TrainOptions{}, fmt.Errorf("advantages task version %q: %v", v, err)
			}
			name = n
		}
		e, err := Estimators(known).Lookup(name)
		if err != nil {
			return TrainOptions{}, fmt.Errorf("advantages task version %q: %w", v, err)
		}
		rest, o.Estimator = r, e
	}
	o.PopulationStd = true
	if r, ok := strings.CutSuffix(rest, " "+sampleStdOption); ok {
		rest, o.PopulationStd = r, false
	}
	var eps float64
	if _, err := fmt.Sscanf(rest, "epsilon=%g no_std=%t keep_zero_std=%t", &eps, &o.NoStd, &o.KeepZeroStd); err != nil {
		return TrainOptions{}, fmt.Errorf("advantages task version %q: %v", v, err)
	}
	o.Epsilon = eps
	if want := code + strings.TrimPrefix(o.Version(), TrainVersion); want != v {
		return TrainOptions{}, fmt.Errorf("advantages task version %q: not one this code writes (it would write %q)", v, want)
	}
	return o, nil
}

// VersionStd reads which standard deviation a TrainTask's Version v
// divided by, without the estimators ParseVersion needs: population is
// true for a version that does not name the sample std (every version
// written before the default flipped). ok is false for a version this
// code did not write.
func VersionStd(v string) (population, ok bool) {
	for _, c := range trainVersions {
		if rest, found := strings.CutPrefix(v, c+" "); found {
			rest, _, _ = strings.Cut(rest, " estimator=")
			return !strings.HasSuffix(rest, " "+sampleStdOption), true
		}
	}
	return false, false
}

// StepName names the loop's advantages step and its calls.
const StepName = "advantages"

// Step is the loop's advantages step: TrainTask(o) between reward and
// train, reading the iteration's trajectories and rewards and feeding its
// "advantages" output to the train task (which then writes no
// advantages.parquet of its own). A train stage kind that trains on
// advantages adds it (kind.Stepped).
func Step(o TrainOptions) pipeline.Step {
	return pipeline.Step{Name: StepName, Task: TrainTask(o), After: pipeline.SlotReward, Before: pipeline.SlotTrain,
		Inputs:  []pipeline.StepInput{pipeline.From(pipeline.SlotGenerate, pipeline.OutTrajectories), pipeline.From(pipeline.SlotReward, pipeline.OutRewards)},
		Outputs: []string{OutAdvantages}}
}

// TrainTask is the task of the loop's advantages step: the advantages a trainer
// trains on, computed once per iteration for the train task to read.
// Inputs "trajectories" and "rewards" (the ones the train task gets),
// output "advantages" (advantages.parquet): Join's rows, one per
// trajectory in (prompt id, sample index) order, masked rows saying why.
// Name "advantages", Env "advantages", Deterministic; the Version is
// o.Version(). Inputs that do not fit together (ErrBatch) fail the call
// Permanently.
func TrainTask(o TrainOptions) *pipeline.Task {
	return &pipeline.Task{
		Name: StepName, Version: o.Version(), Env: "advantages", Deterministic: true, Bookkeeping: true,
		Outputs: []pipeline.Output{{Name: OutAdvantages, File: runs.AdvantagesFile,
			Check: func(path string) error { return tables.CheckFile(path, tables.Advantages) }}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			trajs, err := pipeline.ReadInput(tc, pipeline.OutTrajectories, tables.Trajectories)
			if err != nil {
				return err
			}
			rewards, err := pipeline.ReadInput(tc, pipeline.OutRewards, tables.Rewards)
			if err != nil {
				return err
			}
			b, err := Join(trajs, rewards, o)
			if err != nil {
				return pipeline.Permanent(fmt.Errorf("advantages of iteration %d: %w", tc.Iteration, err))
			}
			return tables.WriteFile(tc.OutputPath(OutAdvantages), tables.Advantages, b.Advantages, nil)
		},
	}
}
