package evaluators

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/policy"
)

// Output names and files of an evaluation task.
const (
	OutSamples = "samples"
	OutSummary = "summary"
)

// MetricExact is the exact expected pass@1 (k = 1): the mean over problems
// of the probability that one sample at temperature 1 is correct, computed
// from token probabilities when the policy can (the embedded model). It
// carries no sampling noise, so small improvements are visible.
const MetricExact = "exact_pass@1"

// TaskOptions configure an evaluation task.
type TaskOptions struct {
	// Policy samples the answers; Identity names its base model.
	Policy   policy.Policy
	Identity string
	// Adapters loads the checkpoint's adapter (default: a loader of its
	// own for Policy).
	Adapters *policy.Adapters
	// Sampling: N samples per problem (n ≥ the largest k), temperature,
	// max tokens. The same for every checkpoint.
	Sampling policy.Sampling
	// Seed seeds every problem's samples, the same for every checkpoint, so
	// checkpoints are compared on the same draws of randomness.
	Seed int64
	// Reward scores the samples; its Correctness decides which are
	// correct (the spec's `correct:` key, by default its component
	// "correct" ≥ 0.5, or without one a total > 0), the same rule the
	// health table uses. The reward stage's compiled spec
	// (*rewards.Program) is one.
	Reward kind.Scorer
	// Set names the eval set ("heldout").
	Set string
	// Ks are the k of the metrics (default 1 and N).
	Ks []int
	// Metrics are computed at every k: the registry's (kind.Registry's
	// Metrics); at least one.
	Metrics kind.Metrics
	// Exact, when set, returns each problem's exact probability that one
	// sample is correct, given the adapter directory ("" for the base
	// model); its mean is reported as MetricExact. Build sets it to the
	// opened policy's model's ExactPass when the model is a
	// policy.ExactScorer (the embedded model).
	Exact func(ctx context.Context, adapterDir string, prompts []tables.Prompt) ([]float64, error)
	// Batch is how many problems go to the policy in one Generate call
	// (default policy.DefaultBatch, as the generate stage's). Every
	// problem is seeded on its own, so the batch size never changes the
	// samples and is not part of the task's version.
	Batch int
	// Env is the task environment (default "eval").
	Env string
}

// Params are an evaluation call's parameters.
type Params struct {
	// Checkpoint is the iteration whose adapter is evaluated; 0 is the base
	// model (or the initial policy).
	Checkpoint int `json:"checkpoint"`
}

// CheckpointName is the checkpoint column's value for an iteration.
func CheckpointName(iteration int) string {
	if iteration == 0 {
		return "base"
	}
	return fmt.Sprintf("iteration-%06d", iteration)
}

// Tasks are the two tasks of an evaluation: Generate samples the eval set
// from a checkpoint (inputs "prompts", "policy"; output "trajectories"),
// Score scores and summarises them (inputs "prompts", "trajectories",
// "policy"; outputs "samples", "summary"). They are cached apart: a new k,
// metric or reward spec rescores stored generations without sampling
// again, and a checkpoint already sampled with the same sampling and seed
// is never sampled twice.
type Tasks struct {
	Generate, Score *pipeline.Task
}

// OutTrajectories is the generate task's output.
const OutTrajectories = "trajectories"

// NewTasks builds the evaluation's tasks. Without a policy it builds
// Score only (Generate nil), for a generate stage that samples the eval
// set itself (kind.EvalGenerator).
func NewTasks(o TaskOptions) (Tasks, error) {
	if o.Reward == nil {
		return Tasks{}, errors.New("evaluation: needs a reward spec")
	}
	if len(o.Metrics) == 0 {
		return Tasks{}, errors.New("evaluation: no metrics: list them in the registry (kind.Registry's Metrics, cli/kinds)")
	}
	if o.Set == "" {
		o.Set = "heldout"
	}
	n := o.Sampling.Samples()
	if len(o.Ks) == 0 {
		o.Ks = []int{1}
		if n > 1 {
			o.Ks = append(o.Ks, n)
		}
	}
	for _, k := range o.Ks {
		if err := checkK(n, 0, k); err != nil {
			return Tasks{}, fmt.Errorf("evaluation: %w", err)
		}
	}
	if o.Adapters == nil && o.Policy != nil {
		o.Adapters = policy.NewAdapters(o.Policy, o.Identity, "", 2)
	}
	if o.Env == "" {
		o.Env = "eval"
	}
	gen, err := digest(struct {
		Identity string
		Sampling policy.Sampling
		Seed     int64
	}{o.Identity, o.Sampling, o.Seed})
	if err != nil {
		return Tasks{}, fmt.Errorf("evaluation: version of the generate task (identity, sampling, seed): %w", err)
	}
	score, err := digest(struct {
		Set, Reward string
		Ks          []int
		Exact       bool
		Metrics     []string `json:",omitempty"`
	}{o.Set, o.Reward.Digest(), o.Ks, o.Exact != nil, metricsKey(o.Metrics)})
	if err != nil {
		return Tasks{}, fmt.Errorf("evaluation: version of the score task (set, reward, ks): %w", err)
	}
	t := Tasks{
		Generate: &pipeline.Task{
			Name: "eval-generate", Version: "eval-generate-1-" + gen, Env: o.Env, Deterministic: true,
			Outputs: []pipeline.Output{{Name: OutTrajectories, File: runs.TrajectoriesFile,
				Check: func(p string) error { return tables.CheckFile(p, tables.Trajectories) }}},
			Run: o.generate,
		},
		Score: &pipeline.Task{
			Name: "eval", Version: "eval-score-1-" + score, Env: o.Env, Deterministic: true,
			Outputs: []pipeline.Output{
				{Name: OutSamples, File: runs.SamplesFile, Check: func(p string) error { return tables.CheckFile(p, tables.EvalSamples) }},
				{Name: OutSummary, File: runs.SummaryFile, Check: func(p string) error { return tables.CheckFile(p, tables.EvalSummary) }},
			},
			Run: o.score,
		},
	}
	if o.Policy == nil {
		t.Generate = nil
	}
	return t, nil
}

// digest hashes v's JSON; it fails on what JSON cannot hold, such as a
// NaN sampling temperature.
// shippedMetrics are the metrics every score task computed before they
// were registry values; their versions name none.
var shippedMetrics = []string{tables.MetricAvgAtK, tables.MetricMajAtK, tables.MetricPassAtK, tables.MetricPassHatK}

// metricsKey is what the score task's version records of its metrics:
// nothing for the shipped four, so their cache keys stay those of the
// runs before metrics were values, else their names (sorted), so that a
// metric added or removed rescores.
func metricsKey(ms kind.Metrics) []string {
	if names := ms.Names(); !slices.Equal(names, shippedMetrics) {
		return names
	}
	return nil
}

func digest(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

// generate samples Sampling.N answers per problem of the eval set from the
// checkpoint, with seeds that do not depend on the checkpoint.
func (o TaskOptions) generate(ctx context.Context, tc *pipeline.TaskContext) error {
	p, prompts, err := readCall(tc)
	if err != nil {
		return err
	}
	// Each problem's seed is its own (policy.PromptRequest), so the batch
	// a problem lands in never changes its samples.
	src := policy.Source{Policy: o.Policy, Identity: o.Identity, Adapters: o.Adapters}
	rows, err := src.Rows(ctx, tc.InputPath("policy"), prompts, policy.RowsOptions{Sampling: o.Sampling,
		Seed: uint64(o.Seed), Batch: o.Batch, Row: policy.RowParams{Iteration: p.Checkpoint}})
	if errors.Is(err, policy.ErrAdapterInput) {
		return pipeline.Permanent(err)
	}
	if err != nil {
		return fmt.Errorf("evaluate %s: %w", CheckpointName(p.Checkpoint), err)
	}
	return tables.WriteFile(tc.OutputPath(OutTrajectories), tables.Trajectories, rows, nil)
}

// score scores the generated answers and summarises them.
func (o TaskOptions) score(ctx context.Context, tc *pipeline.TaskContext) error {
	p, prompts, err := readCall(tc)
	if err != nil {
		return err
	}
	trajs, err := readInput(tc.InputPath("trajectories"), tables.Trajectories)
	if err != nil {
		return pipeline.Permanent(fmt.Errorf("eval generations: %w", err))
	}
	byID := make(map[string]int, len(prompts))
	problems := make([]Problem, len(prompts))
	for i, pr := range prompts {
		byID[pr.PromptID] = i
		problems[i].ID = pr.PromptID
	}
	checkpoint := CheckpointName(p.Checkpoint)
	rule := o.Reward.Correctness()
	rows := make([]tables.EvalSample, 0, len(trajs))
	// The rewards of the samples that were generated, to tell a set whose
	// rewards are all NaN or infinite from one that was merely hard.
	rewarded := make([]tables.Reward, 0, len(trajs))
	for _, traj := range trajs {
		i, ok := byID[traj.PromptID]
		if !ok {
			return pipeline.Permanent(fmt.Errorf("eval generations: prompt %q is not in the eval set", traj.PromptID))
		}
		rw, err := o.Reward.ScoreSample(ctx, traj, prompts[i], tc)
		if err != nil {
			return err
		}
		es := tables.EvalSample{Checkpoint: checkpoint, Evalset: o.Set, ProblemID: traj.PromptID, SampleIndex: traj.SampleIndex,
			Completion: traj.Completion, Answer: o.answerOf(traj.Completion), Reward: rw.Total, Status: traj.Status}
		if traj.Status == tables.StatusOK {
			rewarded = append(rewarded, rw)
		}
		if rw.Scored() {
			es.Correct = rule.Correct(rw)
		} else if es.Status == tables.StatusOK {
			// A reward that failed on an ok sample (an error, a value that
			// is NaN or infinite) is not a wrong answer either: leave the
			// sample out of the metrics.
			es.Status, es.Reward = "reward_"+rw.Outcome(), 0
		}
		if es.Status != tables.StatusOK {
			es.Reward = 0
		}
		rows = append(rows, es)
		problems[i].Samples = append(problems[i].Samples, es)
	}
	if err := tables.CheckFinite(rewarded); err != nil {
		return pipeline.Permanent(fmt.Errorf("evaluate %s on %s: %w", checkpoint, o.Set, err))
	}
	summary, _, err := Summarize(checkpoint, o.Set, problems, o.Ks, o.Metrics)
	if err != nil {
		return pipeline.Permanent(err)
	}
	if o.Exact != nil {
		probs, err := o.Exact(ctx, tc.InputPath("policy"), prompts)
		if err != nil {
			return fmt.Errorf("evaluate %s: exact pass@1: %w", checkpoint, err)
		}
		mean := 0.0
		for _, v := range probs {
			mean += v
		}
		mean /= float64(len(probs))
		lo, hi := Bootstrap(probs, 0)
		summary = append(summary, tables.EvalSummaryRow{Checkpoint: checkpoint, Evalset: o.Set, K: 1, N: 0,
			Metric: MetricExact, Value: mean, CILow: lo, CIHigh: hi, NumProblems: int32(len(probs))})
	}
	if err := tables.WriteFile(tc.OutputPath(OutSamples), tables.EvalSamples, rows, nil); err != nil {
		return err
	}
	return tables.WriteFile(tc.OutputPath(OutSummary), tables.EvalSummary, summary, nil)
}

// answerOf is the answer a completion gives: the reward's extraction
// ("#### n", boxed, last number), else the trimmed text.
func (o TaskOptions) answerOf(completion string) string {
	if a := o.Reward.ExtractAnswer(completion); a != "" {
		return a
	}
	return strings.TrimSpace(completion)
}

// readCall reads what both tasks of an evaluation start from: the call's
// parameters and the eval set.
func readCall(tc *pipeline.TaskContext) (Params, []tables.Prompt, error) {
	var p Params
	if err := tc.Params(&p); err != nil {
		return p, nil, err
	}
	prompts, err := readInput(tc.InputPath("prompts"), tables.Prompts)
	if err != nil {
		return p, nil, pipeline.Permanent(fmt.Errorf("eval set: %w", err))
	}
	return p, prompts, nil
}

// readInput reads a task input, which the engine may leave absent.
func readInput[T any](path string, t *tables.Table[T]) ([]T, error) {
	if path == "" {
		return nil, errors.New("no input")
	}
	return tables.ReadFile(path, t)
}
