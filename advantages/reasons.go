package advantages

// Mask reasons: the words of the advantages table's reason column, in
// every trainer's advantages.parquet and in the mask_reasons metric.
// ReasonRewardStatus and ReasonTrajectory are followed by the status.
const (
	// ReasonRewardStatus: the reward row is not scored ("reward status
	// error", "reward status nonfinite": see tables.Reward.Scored and
	// Outcome). Compute sets it.
	ReasonRewardStatus = "reward status "
	// ReasonAlone: no other sample of the prompt was scored. Compute
	// sets it.
	ReasonAlone = "alone in its group"
	// ReasonTrajectory: the sample failed to generate ("trajectory status
	// timeout"). Join sets it in place of Compute's reason.
	ReasonTrajectory = "trajectory status "
	// ReasonNoReward: the rewards table has no row for the sample. Join
	// sets it in place of Compute's reason.
	ReasonNoReward = "no reward"
	// ReasonNoTokens: the sample has no token ids to train on. Join sets
	// it.
	ReasonNoTokens = "no token ids"
	// ReasonNoSequence: the sample is a multi-turn episode whose exact
	// token sequence is unknown (sequence_ids is null: the policy
	// returned no prompt token ids, or a turn's prompt rewrote the turns
	// before it), so no trainer can know which tokens were its own. Join
	// sets it.
	ReasonNoSequence = "no exact token sequence"
	// ReasonZeroStd: every scored sample of the prompt got the same
	// reward, so the advantage is 0. Join sets it unless
	// TrainOptions.KeepZeroStd.
	ReasonZeroStd = "zero reward variance"
	// ReasonTruncated: the sample stopped at the length limit (finish
	// reason "length", FinishLength) and TrainOptions.MaskTruncated drops
	// it from the loss, as DAPO's overlong filtering. Join sets it.
	ReasonTruncated = "truncated"
)

// FinishLength is the trajectories table's finish_reason of a sample
// that stopped at max_tokens or the context's end (policy.FinishLength).
const FinishLength = "length"
