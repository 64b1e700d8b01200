package tables

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// Table names.
const (
	PromptsName      = "prompts"
	TrajectoriesName = "trajectories"
	RewardsName      = "rewards"
	AdvantagesName   = "advantages"
	ValuesName       = "values"
	EvalSamplesName  = "eval_samples"
	EvalSummaryName  = "eval_summary"
)

// Prompt is one row of the prompts table: a problem the policy is asked.
type Prompt struct {
	PromptID string
	Prompt   string
	// Messages is the chat form of the prompt; nil when only Prompt is set.
	Messages []Message
	Answer   string
	// Metadata is a JSON object as text ("" or "{}" when there is none).
	Metadata string
	Source   string
	Split    string
}

// Prompts is the prompts table.
var Prompts = newTable(PromptsName, 1, []column[Prompt]{
	unique(strCol("prompt_id", "stable id of the prompt, unique in the table", func(r *Prompt) *string { return &r.PromptID })),
	textCol("prompt", "prompt text; may be empty when messages is set", func(r *Prompt) *string { return &r.Prompt }),
	messagesCol("messages", "chat form of the prompt (role, content); null when the prompt is plain text", func(r *Prompt) *[]Message { return &r.Messages }),
	textCol("answer", "reference answer or ground truth used by verifiers", func(r *Prompt) *string { return &r.Answer }),
	textCol("metadata", "free-form JSON object as text", func(r *Prompt) *string { return &r.Metadata }),
	strCol("source", "where the prompt came from (dataset name and revision)", func(r *Prompt) *string { return &r.Source }),
	strCol("split", "dataset split: train, test, …", func(r *Prompt) *string { return &r.Split }),
})

// Trajectory statuses. A status says whether sampling worked; it is kept
// apart from any reward, so an infrastructure failure is never mistaken for
// a wrong answer.
const (
	StatusOK         = "ok"
	StatusTimeout    = "timeout"
	StatusInfraError = "infra_error"
	StatusEnvError   = "env_error"
	StatusTruncated  = "truncated"
)

// Statuses lists the valid trajectory statuses.
var Statuses = []string{StatusOK, StatusTimeout, StatusInfraError, StatusEnvError, StatusTruncated}

// Trajectory is one row of the trajectories table: one sampled completion
// (or multi-turn episode) for a prompt.
type Trajectory struct {
	PromptID    string
	SampleIndex int32
	GroupID     string
	Completion  string
	Turns       []Turn
	// TokenIDs and Logprobs are nil when the policy did not return them.
	// For an episode they are every reply's, concatenated.
	TokenIDs []int32
	Logprobs []float32
	// Sequence is an episode's whole token sequence as the policy saw it
	// (its first prompt, its replies, the observations between them), and
	// Trainable marks each of its tokens: 1 for a token the policy
	// sampled (a reply's, in TokenIDs), 0 for one it was given. Both are
	// nil for a single-turn sample (its prompt and TokenIDs are the
	// sequence) and for an episode whose sequence is not known exactly
	// (the policy returned no prompt token ids, or its prompts did not
	// extend the previous turn's tokens: then nothing of it is trained).
	Sequence  []int32
	Trainable []int32
	// EnvOutcome is an episode's outcome in its environment, a JSON
	// object {"reward": …, "info": {…}}: the sum of the environment's step
	// rewards (a signal the environment gives, not the reward, which the
	// reward stage computes) and the facts its steps recorded (a
	// verifier's output on the final state). Nil for a single-turn sample.
	EnvOutcome    *string
	FinishReason  string
	NumTokens     int32
	PolicyVersion string
	// Sampler is the sampling parameters as a JSON object.
	Sampler   string
	Seed      int64
	Staleness int32
	// Status is one of Statuses.
	Status string
	Error  *string
}

// IsEpisode reports whether the row is a multi-turn episode (it has turns
// or a token sequence) rather than a single-turn sample.
func (t *Trajectory) IsEpisode() bool { return len(t.Turns) > 0 || t.Sequence != nil }

// ReplyTokens are the lengths of an episode's runs of trainable tokens in
// Sequence, in order: the k-th is the number of tokens the k-th reply was
// sampled as. Nil when the episode has no exact sequence.
func (t *Trajectory) ReplyTokens() []int {
	var out []int
	in := false
	for _, m := range t.Trainable {
		switch {
		case m == 1 && in:
			out[len(out)-1]++
		case m == 1:
			out, in = append(out, 1), true
		default:
			in = false
		}
	}
	return out
}

// FirstEpisode is the index of the first episode among rows, or -1.
func FirstEpisode(rows []Trajectory) int {
	for i := range rows {
		if rows[i].IsEpisode() {
			return i
		}
	}
	return -1
}

// Trajectories is the trajectories table.
var Trajectories = func() *Table[Trajectory] {
	t := newTable(TrajectoriesName, 4, []column[Trajectory]{
		strCol("prompt_id", "prompt this sample answers (prompts.prompt_id)", func(r *Trajectory) *string { return &r.PromptID }),
		i32Col("sample_index", "index of the sample among the prompt's samples, from 0", func(r *Trajectory) *int32 { return &r.SampleIndex }),
		strCol("group_id", "group for group-relative advantages (usually the prompt and iteration)", func(r *Trajectory) *string { return &r.GroupID }),
		textCol("completion", "final completion text", func(r *Trajectory) *string { return &r.Completion }),
		sinceFields(4, turnsCol("turns", "episode turns (role, content, tool_calls JSON or null, and since version 4 the policy's token_ids and logprobs of a reply and the turn's status); empty for single-turn sampling", func(r *Trajectory) *[]Turn { return &r.Turns }),
			"element.token_ids", "element.logprobs", "element.status"),
		i32ListCol("token_ids", "completion token ids; null when the policy does not return them", func(r *Trajectory) *[]int32 { return &r.TokenIDs }),
		f32ListCol("logprobs", "per-token log probabilities; null when the policy does not return them", func(r *Trajectory) *[]float32 { return &r.Logprobs }),
		strCol("finish_reason", "why generation stopped: stop, length, tool_calls, …", func(r *Trajectory) *string { return &r.FinishReason }),
		i32Col("num_tokens", "number of completion tokens", func(r *Trajectory) *int32 { return &r.NumTokens }),
		strCol("policy_version", "policy that sampled: base model and adapter digest", func(r *Trajectory) *string { return &r.PolicyVersion }),
		strCol("sampler", "sampling parameters as a JSON object", func(r *Trajectory) *string { return &r.Sampler }),
		i64Col("seed", "sampling seed", func(r *Trajectory) *int64 { return &r.Seed }),
		i32Col("staleness", "policy updates between the sampling policy and the one trained on it", func(r *Trajectory) *int32 { return &r.Staleness }),
		strCol("status", "ok, timeout, infra_error, env_error or truncated; separate from any reward", func(r *Trajectory) *string { return &r.Status }),
		optStrCol("error", "error message when status is not ok; null otherwise", func(r *Trajectory) **string { return &r.Error }),
		since(2, i32ListCol("sequence_ids", "an episode's whole token sequence as the policy saw it (prompt, replies, observations); null for a single-turn sample or when not known exactly", func(r *Trajectory) *[]int32 { return &r.Sequence })),
		since(2, i32ListCol("trainable", "per token of sequence_ids: 1 for a token the policy sampled, 0 for one it was given; null with sequence_ids", func(r *Trajectory) *[]int32 { return &r.Trainable })),
		since(3, optStrCol("env_outcome", "an episode's outcome in its environment, a JSON object {reward, info}: the sum of its step rewards (not the reward) and what its steps recorded (a verifier's output); null for a single-turn sample", func(r *Trajectory) **string { return &r.EnvOutcome })),
	})
	t.check = func(r *Trajectory) error {
		if err := checkStatus(r.Status); err != nil {
			return err
		}
		for i, tu := range r.Turns {
			if tu.Status == "" {
				continue
			}
			if err := checkStatus(tu.Status); err != nil {
				return fmt.Errorf("turn %d: %w", i, err)
			}
		}
		if (r.Sequence == nil) != (r.Trainable == nil) || len(r.Sequence) != len(r.Trainable) {
			return fmt.Errorf("sequence_ids has %d tokens and trainable %d: %w", len(r.Sequence), len(r.Trainable), errInvalid)
		}
		if o := r.EnvOutcome; o != nil && (!strings.HasPrefix(*o, "{") || !json.Valid([]byte(*o))) {
			return fmt.Errorf("env_outcome %.80q is not a JSON object: %w", *o, errInvalid)
		}
		return nil
	}
	return t
}()

func checkStatus(s string) error {
	for _, v := range Statuses {
		if s == v {
			return nil
		}
	}
	return fmt.Errorf("status %q is not one of %s: %w", s, strings.Join(Statuses, ", "), errInvalid)
}

// Reward is one row of the rewards table.
type Reward struct {
	PromptID    string
	SampleIndex int32
	// Components maps a component name to its value; each name is a
	// float64 column r_<name>. A name missing from the map is null.
	Components map[string]float64
	Total      float64
	SpecDigest string
	// VerifierOutputs and JudgeOutputs are JSON text.
	VerifierOutputs string
	JudgeOutputs    string
	Status          string
	Error           *string
}

// Scored reports whether the reward counts: its status is ok and its
// total is a finite number. Advantages and reward statistics use only
// scored rows; the others are a failed rollout or a failed reward, never
// a 0.
func (r Reward) Scored() bool { return r.Status == StatusOK && Finite(r.Total) }

// Outcome is the row's status as the readers of rewards take it: Status,
// except RewardNonfinite for a row that says ok but whose total is NaN or
// infinite (as a rewards table a command wrote may hold).
func (r Reward) Outcome() string {
	if r.Status == StatusOK && !Finite(r.Total) {
		return RewardNonfinite
	}
	return r.Status
}

// Finite reports whether v is a number a reward can be: neither NaN nor
// ±Inf.
func Finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// MeanTotal is the mean total reward over the scored rows, and their
// number; NaN when none is scored.
func MeanTotal(rows []Reward) (mean float64, scored int) {
	s := 0.0
	for i := range rows {
		if rows[i].Scored() {
			s += rows[i].Total
			scored++
		}
	}
	if scored == 0 {
		return math.NaN(), 0
	}
	return s / float64(scored), scored
}

// Rewards is the rewards table without components. Use RewardsWith to
// write a file with r_<component> columns; readers discover them.
var Rewards = func() *Table[Reward] {
	t := newTable(RewardsName, 1, []column[Reward]{
		// Rewards files are written in the order of their trajectories,
		// so a prompt's ids come in runs that zstd compresses: a
		// dictionary of them would only cost a hash per row. (Totals and
		// components keep theirs: rewards take few values, a dictionary
		// stores them in a few bits, and one that grows too large falls
		// back to plain pages.)
		noDictionary(strCol("prompt_id", "prompt of the scored sample", func(r *Reward) *string { return &r.PromptID })),
		i32Col("sample_index", "sample index of the scored sample", func(r *Reward) *int32 { return &r.SampleIndex }),
		f64Col("total", "total reward the trainer uses", func(r *Reward) *float64 { return &r.Total }),
		strCol("spec_digest", "digest of the reward spec that produced the row", func(r *Reward) *string { return &r.SpecDigest }),
		textCol("verifier_outputs", "verifier outputs as a JSON object keyed by verifier", func(r *Reward) *string { return &r.VerifierOutputs }),
		textCol("judge_outputs", "judge outputs as a JSON object keyed by judge", func(r *Reward) *string { return &r.JudgeOutputs }),
		strCol("status", "ok, or why the sample could not be scored", func(r *Reward) *string { return &r.Status }),
		optStrCol("error", "error message when status is not ok; null otherwise", func(r *Reward) **string { return &r.Error }),
	})
	t.dyn = &dynamic[Reward]{
		prefix:  ComponentPrefix,
		at:      2,
		col:     componentCol,
		collect: collectComponents,
		check:   checkComponents,
	}
	return t
}()

// Advantage is one row of the advantages table.
type Advantage struct {
	PromptID    string
	SampleIndex int32
	Advantage   float64
	GroupMean   float64
	GroupStd    float64
	GroupSize   int32
	// Mask is true when the sample is excluded from training.
	Mask bool
	// Reason says why a sample is masked ("" when it is not).
	Reason string
}

// Advantages is the advantages table.
var Advantages = newTable(AdvantagesName, 1, []column[Advantage]{
	strCol("prompt_id", "prompt of the sample", func(r *Advantage) *string { return &r.PromptID }),
	i32Col("sample_index", "sample index", func(r *Advantage) *int32 { return &r.SampleIndex }),
	f64Col("advantage", "advantage used by the trainer", func(r *Advantage) *float64 { return &r.Advantage }),
	f64Col("group_mean", "mean total reward of the sample's group", func(r *Advantage) *float64 { return &r.GroupMean }),
	f64Col("group_std", "standard deviation of the group's total reward", func(r *Advantage) *float64 { return &r.GroupStd }),
	i32Col("group_size", "number of samples in the group", func(r *Advantage) *int32 { return &r.GroupSize }),
	boolCol("mask", "true when the sample is excluded from training", func(r *Advantage) *bool { return &r.Mask }),
	strCol("reason", "why the sample is masked; empty when it is not", func(r *Advantage) *string { return &r.Reason }),
})

// TokenValue is one row of the values table: a sample PPO trained on,
// with its critic's figures per trainable token (its token_ids in order;
// an episode's observation tokens are left out). Rewards are the
// per-token rewards (the reward total on the last token, and −β·k1 on
// every token with the KL in the reward), Values the critic's before the
// update, Returns GAE's returns (advantages + values, before whitening)
// and Advantages those the policy was trained on (whitened over the
// batch).
type TokenValue struct {
	PromptID    string
	SampleIndex int32
	Rewards     []float64
	Values      []float64
	Returns     []float64
	Advantages  []float64
}

// TokenValues is the values table, values.parquet: one row per trained
// sample, sorted by (prompt_id, sample_index).
var TokenValues = newTable(ValuesName, 1, []column[TokenValue]{
	strCol("prompt_id", "prompt of the sample", func(r *TokenValue) *string { return &r.PromptID }),
	i32Col("sample_index", "sample index", func(r *TokenValue) *int32 { return &r.SampleIndex }),
	f64ListCol("rewards", "per-token reward of each trainable token", func(r *TokenValue) *[]float64 { return &r.Rewards }),
	f64ListCol("values", "the critic's value of each trainable token, before the update", func(r *TokenValue) *[]float64 { return &r.Values }),
	f64ListCol("returns", "GAE's return of each trainable token (advantage + value, before whitening)", func(r *TokenValue) *[]float64 { return &r.Returns }),
	f64ListCol("advantages", "the advantage each trainable token was trained with (whitened over the batch)", func(r *TokenValue) *[]float64 { return &r.Advantages }),
})

// EvalSample is one row of the eval_samples table: one sampled answer to
// one held-out problem.
type EvalSample struct {
	Checkpoint  string
	Evalset     string
	ProblemID   string
	SampleIndex int32
	Completion  string
	Answer      string
	Correct     bool
	Reward      float64
	Status      string
}

// EvalSamples is the eval_samples table.
var EvalSamples = newTable(EvalSamplesName, 1, []column[EvalSample]{
	strCol("checkpoint", "policy checkpoint evaluated", func(r *EvalSample) *string { return &r.Checkpoint }),
	strCol("evalset", "held-out set name", func(r *EvalSample) *string { return &r.Evalset }),
	strCol("problem_id", "problem id within the eval set", func(r *EvalSample) *string { return &r.ProblemID }),
	i32Col("sample_index", "sample index for the problem, from 0", func(r *EvalSample) *int32 { return &r.SampleIndex }),
	textCol("completion", "sampled completion", func(r *EvalSample) *string { return &r.Completion }),
	textCol("answer", "answer extracted from the completion", func(r *EvalSample) *string { return &r.Answer }),
	boolCol("correct", "whether the answer is correct", func(r *EvalSample) *bool { return &r.Correct }),
	f64Col("reward", "reward of the sample", func(r *EvalSample) *float64 { return &r.Reward }),
	strCol("status", "sampling status, as in trajectories", func(r *EvalSample) *string { return &r.Status }),
})

// Eval metrics.
const (
	MetricAvgAtK   = "avg@k"
	MetricPassAtK  = "pass@k"
	MetricPassHatK = "pass^k"
	MetricMajAtK   = "maj@k"
)

// EvalSummaryRow is one row of the eval_summary table: one metric at one k.
type EvalSummaryRow struct {
	Checkpoint  string
	Evalset     string
	K           int32
	N           int32
	Metric      string
	Value       float64
	CILow       float64
	CIHigh      float64
	NumProblems int32
}

// EvalSummary is the eval_summary table.
var EvalSummary = newTable(EvalSummaryName, 1, []column[EvalSummaryRow]{
	strCol("checkpoint", "policy checkpoint evaluated", func(r *EvalSummaryRow) *string { return &r.Checkpoint }),
	strCol("evalset", "held-out set name", func(r *EvalSummaryRow) *string { return &r.Evalset }),
	i32Col("k", "k of the metric", func(r *EvalSummaryRow) *int32 { return &r.K }),
	i32Col("n", "samples per problem the estimate uses (n ≥ k)", func(r *EvalSummaryRow) *int32 { return &r.N }),
	strCol("metric", "avg@k, pass@k, pass^k or maj@k", func(r *EvalSummaryRow) *string { return &r.Metric }),
	f64Col("value", "metric value, a fraction in [0, 1]", func(r *EvalSummaryRow) *float64 { return &r.Value }),
	f64Col("ci_low", "lower bound of the 95% confidence interval", func(r *EvalSummaryRow) *float64 { return &r.CILow }),
	f64Col("ci_high", "upper bound of the 95% confidence interval", func(r *EvalSummaryRow) *float64 { return &r.CIHigh }),
	i32Col("num_problems", "problems in the eval set", func(r *EvalSummaryRow) *int32 { return &r.NumProblems }),
})
