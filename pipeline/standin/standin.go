// Package standin provides stand-in stages for the RL loop: tasks with the
// inputs, outputs and tables of the real ones (sample, generate, reward,
// train) that sleep, write deterministic tables, call a memoized judge and
// fail a chosen number of times. They exercise the engine — overlap,
// caching, retries, resume — before the real stages exist, and stay useful
// as fast fixtures for engine tests and benchmarks.
package standin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
)

// Options shape the stand-ins. Zero values mean: no sleep, one sample a
// prompt, never fail, score locally.
type Options struct {
	SampleSleep, GenerateSleep, RewardSleep, TrainSleep time.Duration
	// SamplesPerPrompt is the group size G.
	SamplesPerPrompt int
	// FailTimes makes a stage's first N attempts fail with a transient
	// error (keys: sample, generate, reward, train).
	FailTimes map[string]int
	// JudgeURL, when set, scores each sample with a memoized POST to this
	// URL ({"prompt_id", "sample_index", "completion"} → {"score"}).
	JudgeURL string
	// Envs names the task environment of each stage (default: the stage name).
	Envs map[string]string
}

// Stages returns the four stand-in stages.
func Stages(o Options) pipeline.Stages {
	if o.SamplesPerPrompt <= 0 {
		o.SamplesPerPrompt = 1
	}
	env := func(stage string) string {
		if e, ok := o.Envs[stage]; ok {
			return e
		}
		return stage
	}
	return pipeline.Stages{
		Sample: &pipeline.Task{Name: pipeline.SlotSample, Version: "standin-1", Env: env(pipeline.SlotSample), Deterministic: true,
			Outputs: []pipeline.Output{{Name: pipeline.OutPrompts, File: runs.PromptsFile, Check: check(tables.Prompts)}},
			Run:     o.sample},
		Generate: &pipeline.Task{Name: pipeline.SlotGenerate, Version: "standin-1", Env: env(pipeline.SlotGenerate),
			Outputs: []pipeline.Output{{Name: pipeline.OutTrajectories, File: runs.TrajectoriesFile, Check: check(tables.Trajectories)}},
			Run:     o.generate},
		Reward: &pipeline.Task{Name: pipeline.SlotReward, Version: "standin-1", Env: env(pipeline.SlotReward), Deterministic: true,
			Outputs: []pipeline.Output{{Name: pipeline.OutRewards, File: runs.RewardsFile, Check: check(tables.Rewards)}},
			Run:     o.reward},
		Train: &pipeline.Task{Name: pipeline.SlotTrain, Version: "standin-1", Env: env(pipeline.SlotTrain), Deterministic: true,
			Outputs: []pipeline.Output{{Name: pipeline.OutAdapter, File: runs.AdapterDir, Dir: true}, {Name: pipeline.OutMetrics, File: runs.TrainMetricsFile}},
			Run:     o.train},
	}
}

// check validates that a written file is a table of the given kind.
func check[T any](t *tables.Table[T]) func(string) error {
	return func(path string) error { return tables.CheckFile(path, t) }
}

func (o Options) pause(ctx context.Context, stage string, d time.Duration, tc *pipeline.TaskContext) error {
	if d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if tc.Attempt <= o.FailTimes[stage] {
		return fmt.Errorf("stand-in %s: planned failure of attempt %d of %d", stage, tc.Attempt, o.FailTimes[stage])
	}
	return nil
}

// begin reads a loop task's parameters and pauses as stage does: the
// start of the sample and train tasks.
func (o Options) begin(ctx context.Context, stage string, d time.Duration, tc *pipeline.TaskContext) (loopParams, error) {
	var p loopParams
	if err := tc.Params(&p); err != nil {
		return p, err
	}
	return p, o.pause(ctx, stage, d, tc)
}

// hash64 is a deterministic 64-bit value of its parts.
func hash64(parts ...any) uint64 {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprint(h, p, "\x00")
	}
	return binary.LittleEndian.Uint64(h.Sum(nil)[:8])
}

type loopParams struct {
	Cursor          int `json:"cursor"`
	Count           int `json:"count"`
	Iteration       int `json:"iteration"`
	PolicyIteration int `json:"policy_iteration"`
	Staleness       int `json:"staleness"`
}

// sample takes count prompts from the dataset starting at cursor, wrapping
// around (an epoch boundary), as the dataset kind does (pipeline.TakeBatch).
func (o Options) sample(ctx context.Context, tc *pipeline.TaskContext) error {
	p, err := o.begin(ctx, pipeline.SlotSample, o.SampleSleep, tc)
	if err != nil {
		return err
	}
	all, err := tables.ReadFile(tc.InputPath("dataset"), tables.Prompts)
	if err != nil {
		return pipeline.Permanent(err)
	}
	if len(all) == 0 {
		return pipeline.Permanent(errors.New("the dataset has no prompts"))
	}
	rows, err := pipeline.TakeBatch(all, p.Cursor, p.Count)
	if err != nil {
		return pipeline.Permanent(err)
	}
	return tables.WriteFile(tc.OutputPath(pipeline.OutPrompts), tables.Prompts, rows, nil)
}

// adapter is the stand-in's "weights": a skill level and a lineage.
type adapter struct {
	Iteration  int     `json:"iteration"`
	Skill      int     `json:"skill"`
	MeanReward float64 `json:"mean_reward"`
	Parent     string  `json:"parent"`
}

// policyVersion is the adapter's digest, or "base".
func policyVersion(dir string) (string, int, error) {
	if dir == "" {
		return "base", 0, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "adapter_model.json"))
	if err != nil {
		return "", 0, pipeline.Permanent(fmt.Errorf("read policy: %w", err))
	}
	var a adapter
	if err := json.Unmarshal(b, &a); err != nil {
		return "", 0, pipeline.Permanent(fmt.Errorf("read policy: %w", err))
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8]), a.Skill, nil
}

// generate writes G completions a prompt of the iteration's batch.
func (o Options) generate(ctx context.Context, tc *pipeline.TaskContext) error {
	var p loopParams
	if err := tc.Params(&p); err != nil {
		return err
	}
	return o.writeSamples(ctx, tc, tc.Seed, p.Iteration, p.Staleness)
}

// evalGenerate samples an eval set from a checkpoint as generate does,
// n completions a problem, with the eval section's seed whatever the
// checkpoint.
func (o Options) evalGenerate(seed int64) pipeline.Func {
	return func(ctx context.Context, tc *pipeline.TaskContext) error {
		var p struct {
			Checkpoint int `json:"checkpoint"`
		}
		if err := tc.Params(&p); err != nil {
			return err
		}
		return o.writeSamples(ctx, tc, uint64(seed), p.Checkpoint, 0)
	}
}

// writeSamples writes SamplesPerPrompt completions of each input prompt
// from the input policy. A completion is right with a probability that
// grows with the policy's skill, decided by a hash of (seed, prompt,
// sample, policy) so it is deterministic.
func (o Options) writeSamples(ctx context.Context, tc *pipeline.TaskContext, seed uint64, iteration, staleness int) error {
	if err := o.pause(ctx, pipeline.SlotGenerate, o.GenerateSleep, tc); err != nil {
		return err
	}
	prompts, err := tables.ReadFile(tc.InputPath("prompts"), tables.Prompts)
	if err != nil {
		return pipeline.Permanent(err)
	}
	version, skill, err := policyVersion(tc.InputPath("policy"))
	if err != nil {
		return err
	}
	var rows []tables.Trajectory
	for _, pr := range prompts {
		for i := 0; i < o.SamplesPerPrompt; i++ {
			h := hash64(seed, pr.PromptID, i, version)
			answer := pr.Answer
			if int(h%100) >= 30+skill {
				answer += "0"
			}
			c := "The answer is #### " + answer
			rows = append(rows, tables.Trajectory{
				PromptID: pr.PromptID, SampleIndex: int32(i), GroupID: fmt.Sprintf("%06d-%s", iteration, pr.PromptID),
				Completion: c, FinishReason: "stop", NumTokens: int32(len(c)), PolicyVersion: version,
				Sampler: `{"temperature":1}`, Seed: int64(h >> 1), Staleness: int32(staleness), Status: tables.StatusOK,
			})
		}
	}
	return tables.WriteFile(tc.OutputPath(pipeline.OutTrajectories), tables.Trajectories, rows, nil)
}

// reward scores 1 for a completion ending in the prompt's answer — through
// the judge when one is configured, each call memoized.
func (o Options) reward(ctx context.Context, tc *pipeline.TaskContext) error {
	if err := o.pause(ctx, pipeline.SlotReward, o.RewardSleep, tc); err != nil {
		return err
	}
	trajs, err := tables.ReadFile(tc.InputPath("trajectories"), tables.Trajectories)
	if err != nil {
		return pipeline.Permanent(err)
	}
	rt, err := tables.RewardsWith("correct")
	if err != nil {
		return err
	}
	rows := make([]tables.Reward, len(trajs))
	for i, tr := range trajs {
		score, err := o.score(ctx, tc, tr)
		if err != nil {
			return err
		}
		rows[i] = tables.Reward{PromptID: tr.PromptID, SampleIndex: tr.SampleIndex, Components: map[string]float64{"correct": score},
			Total: score, SpecDigest: "standin", VerifierOutputs: "{}", JudgeOutputs: "{}", Status: tables.StatusOK}
	}
	return tables.WriteFile(tc.OutputPath(pipeline.OutRewards), rt, rows, nil)
}

func (o Options) score(ctx context.Context, tc *pipeline.TaskContext, tr tables.Trajectory) (float64, error) {
	local := func() float64 {
		if len(tr.Completion) > 0 && tr.Completion[len(tr.Completion)-1] != '0' {
			return 1
		}
		return 0
	}
	if o.JudgeURL == "" {
		return local(), nil
	}
	key := map[string]any{"prompt_id": tr.PromptID, "sample_index": tr.SampleIndex, "completion": tr.Completion}
	var score float64
	err := tc.Memo(ctx, key, &score, func(ctx context.Context) (any, error) {
		body, err := json.Marshal(key)
		if err != nil {
			return nil, pipeline.Permanent(fmt.Errorf("judge request for %s sample %d: %w", tr.PromptID, tr.SampleIndex, err))
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.JudgeURL, bytes.NewReader(body))
		if err != nil {
			return nil, pipeline.Permanent(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("judge: %s", resp.Status)
		}
		var out struct{ Score float64 }
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return nil, err
		}
		return out.Score, nil
	})
	return score, err
}

// train derives the next adapter from the previous one and the rewards.
func (o Options) train(ctx context.Context, tc *pipeline.TaskContext) error {
	p, err := o.begin(ctx, pipeline.SlotTrain, o.TrainSleep, tc)
	if err != nil {
		return err
	}
	rt, err := tables.RewardsWith("correct")
	if err != nil {
		return err
	}
	rewards, err := tables.ReadFile(tc.InputPath("rewards"), rt)
	if err != nil {
		return pipeline.Permanent(err)
	}
	parent, skill, err := policyVersion(tc.InputPath("policy"))
	if err != nil {
		return err
	}
	// The mean is over the scored rows: a failed row's total is NaN, and an
	// iteration with none scored learns nothing (mean 0).
	mean, scored := 0.0, 0
	for _, r := range rewards {
		if r.Scored() {
			mean += r.Total
			scored++
		}
	}
	if scored > 0 {
		mean /= float64(scored)
	}
	next := adapter{Iteration: p.Iteration, Skill: min(skill+int(mean*10), 69), MeanReward: mean, Parent: parent}
	dir := tc.OutputPath(pipeline.OutAdapter)
	b, err := json.MarshalIndent(next, "", "  ")
	if err != nil {
		return pipeline.Permanent(fmt.Errorf("stand-in train: encode the adapter: %w", err))
	}
	if err := os.WriteFile(filepath.Join(dir, "adapter_model.json"), b, 0o644); err != nil {
		return err
	}
	cfg := `{"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["standin"]}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "adapter_config.json"), []byte(cfg), 0o644); err != nil {
		return err
	}
	metrics := map[string]string{"iteration": strconv.Itoa(p.Iteration), "mean_reward": strconv.FormatFloat(mean, 'f', 6, 64), "samples": strconv.Itoa(len(rewards))}
	mb, err := json.MarshalIndent(metrics, "", "  ")
	if err != nil {
		return pipeline.Permanent(fmt.Errorf("stand-in train: encode the metrics: %w", err))
	}
	return os.WriteFile(tc.OutputPath(pipeline.OutMetrics), mb, 0o644)
}
