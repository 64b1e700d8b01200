// Package advantages turns an iteration's rewards into GRPO's
// group-relative advantages: the noun the reward stage, rescoring and
// every trainer share, so that it has one implementation and one set of
// words for why a sample is left out.
//
// # Groups
//
// The samples of one prompt form a group. Within it, Compute gives each
// scored sample
//
//	A_i = (r_i − mean(r)) / (std(r) + ε)        (Options.NoStd: r_i − mean(r))
//
// with the mean and the sample standard deviation (Bessel's n − 1, as TRL
// and verl; Options.PopulationStd: over n) over the group's scored
// samples only (tables.Reward.Scored: status ok, a total that is a
// number). A sample that was not scored is masked and stays out of the
// statistics, so a failed rollout is never trained on as a reward of 0.
// Stats count the groups, those with two or more scored samples
// (MultiSample), those of them whose scored rewards are all equal
// (ZeroStd: they carry no signal) and the masked samples.
//
//	adv, st := advantages.Compute(rewards, advantages.Options{})
//	for _, a := range adv {
//		if a.Mask {
//			log.Printf("%s/%d left out: %s", a.PromptID, a.SampleIndex, a.Reason)
//		}
//	}
//
// # Estimators
//
// How a group's scored rewards become advantages is an Estimator, a
// value with a Name. rlpipe ships four:
//
//	grpo     GRPO, the formula above (the default)
//	rloo     RLOO: A_i = r_i − mean_{j≠i} r_j = G/(G−1)·(r_i − mean(r)); needs G ≥ 2
//	dr_grpo  Dr. GRPO's advantage: A_i = r_i − mean(r) (Dr. GRPO only
//	         with its loss normaliser, the trainers' aggregation
//	         seq_mean_token_sum_norm)
//	reinforce_plus_plus_baseline
//	         REINFORCE++ with a group baseline: s_i = r_i − mean(r), then
//	         whitened over the batch, (s_i − mean_B s) / sqrt(var_B s + 1e-8)
//
// The last is a BatchEstimator: its Batch step sees every group's
// advantages at once (the samples, each weighing one; verl weighs each by
// its token count).
// Dr. GRPO's constant loss normalizer (Σ over tokens / (G·L_max)) is the
// loss's half of the method, not the estimator's. An estimator that needs
// groups of at least some size says so (GroupMinimum, RLOO's 2): a run
// whose generate stage samples fewer per prompt is refused when planned.
// GRPO divides by the sample std (n − 1, as TRL and verl) by default
// since issue 36; Options.PopulationStd (the file's advantages.std:
// population) keeps the population std every run used before. The
// version names the sample std (" std=sample") and not the population
// one, so a version written before the flip reads back as the population
// std it computed, and a resumed run keeps the std of its committed
// iterations unless its file says which (pipeline/driver).
// docs/TRAINERS.md lists which of the peers' functions each estimator is
// checked against (peer_test.go, against verl's and TRL's own code).
// Options.Estimator chooses another (the pipeline file's
// advantages.estimator key, looked up in the program's registry,
// kind.Registry's Estimators); Compute keeps the grouping, the masks, the
// group statistics and Stats the same for all. A new estimator is one
// file here (see grpo.go), one entry in cli/kinds.Registry, and a test
// that runs advantages/estimatortest. A TrainTask's version names the
// estimator unless it is GRPO, so GRPO's cache keys are those of the
// runs before estimators were values; ParseVersion reads it back given
// the registry's estimators, as rescoring does (rescore.Options).
//
// # A trainer's batch
//
// Join is what both trainers train on: it matches an iteration's rewards
// to its trajectories by prompt id and sample index (a sample twice, or a
// reward without its sample, is an ErrBatch), treats a failed trajectory
// or a missing reward as unscored, computes the advantages, and masks the
// samples a trainer cannot learn from.
//
// # Mask reasons
//
// The reason column of the advantages table holds one of the Reason
// constants: Compute sets ReasonRewardStatus and ReasonAlone; Join, which
// also sees the trajectories, replaces them with ReasonTrajectory or
// ReasonNoReward when the sample failed earlier, and adds ReasonZeroStd
// (unless TrainOptions.KeepZeroStd), ReasonNoTokens and ReasonNoSequence
// (an episode whose exact token sequence is unknown) for samples no
// trainer can learn from. With TrainOptions.MaskTruncated (the file's
// advantages.mask_truncated_completions, DAPO's overlong filtering) it
// masks a sample whose finish reason is "length" as ReasonTruncated, ahead
// of those three; the sample still counts in its group's mean and std, as
// in TRL, and only leaves the loss. The same words appear in the trainers'
// mask_reasons metric.
//
// Non-finite values are bad data, not failed samples: a reward whose
// status says ok but whose total is NaN or infinite, and a non-finite
// logprob or advantage of a sample left to train on, are an ErrNonfinite
// (an ErrBatch) naming the file, its row and the sample, so the
// advantages step and the trainers fail permanently. A reward the reward
// stage marked nonfinite stays a masked failure (ReasonRewardStatus).
//
// Given is Join with the advantages read back from such a table instead
// of computed: a trainer handed the loop's advantages matches their rows
// to its trajectories (ErrRows when they do not fit) and trains on them.
//
// # The tasks
//
// Step is the loop's advantages step (a pipeline.Step between reward and
// train that the grpo and external train kinds add); its task, TrainTask,
// writes Join's rows for an iteration's trajectories and rewards, written once
// to advantages.parquet for the train task to read. Task writes
// advantages.parquet from rewards.parquet alone; rescoring runs it on
// every iteration that had advantages, so training on a rescored branch
// sees the new reward.
//
// # Checklist for an advantage estimator
//
//   - Required: Estimator (Name, Group), deterministic, one advantage per
//     reward, keeping nothing of its input.
//   - Optional: GroupMinimum (groups smaller than it are refused at plan
//     time), BatchEstimator (a step over the whole batch). Compute does the
//     grouping, masking and statistics.
//   - Its test: advantages/estimatortest.Run with a group worked out by
//     hand; one entry in cli/kinds.Registry's Estimators, selected by the
//     file's advantages.estimator.
package advantages
