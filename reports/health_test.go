package reports

import (
	"math"
	"reflect"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

func traj(pid string, idx int32, status, completion string, tokens int32, finish string, stale int32) tables.Trajectory {
	return tables.Trajectory{PromptID: pid, SampleIndex: idx, Status: status, Completion: completion, NumTokens: tokens, FinishReason: finish, Staleness: stale}
}

func reward(pid string, idx int32, total float64, comps map[string]float64) tables.Reward {
	return tables.Reward{PromptID: pid, SampleIndex: idx, Total: total, Components: comps, Status: tables.StatusOK}
}

func skipped(pid string, idx int32, status string) tables.Reward {
	return tables.Reward{PromptID: pid, SampleIndex: idx, Total: math.NaN(), Status: status}
}

func ptr(v float64) *float64 { return &v }

// handMade is one iteration of three prompts: p1 solved by every sample,
// p2 by none (one timeout, one infrastructure failure), p3 by some (one
// truncated sample, one whose reward failed).
func handMade() ([]tables.Trajectory, []tables.Reward) {
	ok := tables.StatusOK
	trajs := []tables.Trajectory{
		traj("p1", 0, ok, "42", 2, "stop", 0),
		traj("p1", 1, ok, "42", 2, "stop", 0),
		traj("p1", 2, ok, "42", 2, "stop", 1),
		traj("p1", 3, ok, " 42\n", 2, "stop", 1),
		traj("p2", 0, ok, "7", 1, "stop", 0),
		traj("p2", 1, ok, "42", 4, "length", 0),
		traj("p2", 2, tables.StatusTimeout, "", 0, "", 0),
		traj("p2", 3, tables.StatusInfraError, "", 0, "", 0),
		traj("p3", 0, ok, "abc", 3, "stop", 0),
		traj("p3", 1, ok, "x", 1, "stop", 0),
		traj("p3", 2, tables.StatusTruncated, "loooong", 8, "length", 0),
		traj("p3", 3, ok, "y", 1, "stop", 0),
	}
	c := func(correct, format float64) map[string]float64 {
		return map[string]float64{"correct": correct, "format": format}
	}
	rws := []tables.Reward{
		reward("p1", 0, 1, c(1, 1)), reward("p1", 1, 1, c(1, 1)), reward("p1", 2, 1, c(1, 1)), reward("p1", 3, 1, c(1, 1)),
		reward("p2", 0, 0, c(0, 1)), reward("p2", 1, 0, c(0, 0)),
		skipped("p2", 2, "skipped_timeout"), skipped("p2", 3, "skipped_infra_error"),
		reward("p3", 0, 1, c(1, 1)), reward("p3", 1, 0, c(0, 1)),
		skipped("p3", 2, "skipped_truncated"), skipped("p3", 3, "error"),
	}
	return trajs, rws
}

func TestComputeHealthExact(t *testing.T) {
	trajs, rws := handMade()
	tm := &TrainMetrics{Loss: ptr(0.5), KL: ptr(0.01), Entropy: ptr(1.25), ClipLow: ptr(0.1), ClipHigh: ptr(0.2), RatioDev: ptr(0.03), GradNorm: ptr(0.7)}
	h := ComputeHealth(3, trajs, rws, tm, nil)

	rewardStd := math.Sqrt(0.625 - 0.625*0.625)
	checks := []struct {
		name      string
		got, want float64
	}{
		{"samples", float64(h.Samples), 12},
		{"scored", float64(h.Scored), 8},
		{"errored", float64(h.Errored), 2}, // p2#3 infra_error, p3#3 reward error
		{"timed_out", float64(h.TimedOut), 1},
		{"truncated", float64(h.Truncated), 1},
		{"reward_mean", h.Reward.Mean, 0.625},
		{"reward_std", h.Reward.Std, rewardStd},
		{"reward_min", h.Reward.Min, 0},
		{"reward_max", h.Reward.Max, 1},
		{"groups", float64(h.Groups), 3},
		{"frac_reward_zero_std", h.FracZeroStd, 2.0 / 3},
		{"frac_solved_all", h.FracSolvedAll, 1.0 / 3},
		{"frac_solved_none", h.FracSolvedNone, 1.0 / 3},
		{"frac_mixed", h.FracMixed, 1.0 / 3},
		{"response_length_mean", h.LengthMean, 2.6}, // 26 tokens over 10 generated
		{"response_length_max", float64(h.LengthMax), 8},
		{"response_chars_mean", h.CharsMean, 2.5}, // " 42\n" is 4 characters
		{"frac_finish_length", h.FracLength, 0.2},
		{"staleness_mean", h.StalenessMean, 0.2},
		{"top_completion_share", h.TopShare, 0.5}, // "42" five times (trimmed), in p1 and p2
		{"top_completion_prompts", float64(h.TopPrompts), 2},
		{"format_mean", h.FormatMean, 0.875},
		{"correct_mean", h.CorrectMean, 0.625},
		{"format_without_correct", h.FormatWithoutCorrect, 0.25},
		{"r_correct_mean", h.Components["correct"].Mean, 0.625},
		{"r_format_mean", h.Components["format"].Mean, 0.875},
		{"loss", h.Loss, 0.5},
		{"kl", h.KL, 0.01},
		{"entropy", h.Entropy, 1.25},
		{"clip_frac_high", h.ClipHigh, 0.2},
		{"grad_norm", h.GradNorm, 0.7},
	}
	for _, c := range checks {
		if math.Abs(c.got-c.want) > 1e-12 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if h.TopCompletion != "42" || !reflect.DeepEqual(h.ComponentNames, []string{"correct", "format"}) {
		t.Errorf("top completion %q, components %v", h.TopCompletion, h.ComponentNames)
	}
	for name, v := range map[string]float64{"disagreement": h.Disagreement, "policy_loss": h.PolicyLoss} {
		if !math.IsNaN(v) {
			t.Errorf("%s = %v, want NaN (not reported)", name, v)
		}
	}
}

func TestComputeHealthJudgeVersusVerifier(t *testing.T) {
	ok := tables.StatusOK
	var trajs []tables.Trajectory
	var rws []tables.Reward
	// Components: judge verdicts T F T T, verifier verdicts T T F T.
	for i, jv := range [][2]float64{{0.9, 1}, {0.2, 1}, {0.8, 0}, {0.6, 1}} {
		trajs = append(trajs, traj("p", int32(i), ok, "c", 1, "stop", 0))
		rws = append(rws, reward("p", int32(i), jv[0]+jv[1], map[string]float64{"judge_quality": jv[0], "verifier_tests": jv[1]}))
	}
	// JSON outputs: the verifier failed, the judge liked it.
	trajs = append(trajs, traj("q", 0, ok, "d", 1, "stop", 0))
	r := reward("q", 0, 1, nil)
	r.VerifierOutputs, r.JudgeOutputs = `{"tests":{"passed":false,"exit_code":1}}`, `{"style":{"score":0.9}}`
	rws = append(rws, r)
	h := ComputeHealth(1, trajs, rws, nil, nil)
	if h.Disagreement != 3.0/5 {
		t.Fatalf("disagreement = %v, want 0.6", h.Disagreement)
	}
	if !math.IsNaN(h.Loss) || !math.IsNaN(h.FormatMean) {
		t.Fatalf("loss %v, format %v: want NaN", h.Loss, h.FormatMean)
	}
}

func TestComputeHealthEmpty(t *testing.T) {
	h := ComputeHealth(1, nil, nil, nil, nil)
	if h.Samples != 0 || h.Groups != 0 || !math.IsNaN(h.Reward.Mean) || !math.IsNaN(h.TopShare) {
		t.Fatalf("empty health = %+v", h)
	}
}

// TestComputeHealthCorrectnessRule: the groups split by the spec's rule
// (HealthOptions.Correct), not by component names. Two groups of two
// samples with components accuracy (not "correct") and length: p1's
// samples are right but long (accuracy 1, total 0), p2's one right and
// short (total 1), one wrong (total 0). The old rule took accuracy ≥ 0.5;
// the default, as evaluation, takes the total > 0; a declared rule on
// accuracy gives the old split back, and PassThreshold moves neither.
func TestComputeHealthCorrectnessRule(t *testing.T) {
	ok := tables.StatusOK
	c := func(acc, length float64) map[string]float64 {
		return map[string]float64{"accuracy": acc, "length": length}
	}
	trajs := []tables.Trajectory{traj("p1", 0, ok, "123", 3, "stop", 0), traj("p1", 1, ok, "123", 3, "stop", 0),
		traj("p2", 0, ok, "12", 2, "stop", 0), traj("p2", 1, ok, "13", 2, "stop", 0)}
	rws := []tables.Reward{reward("p1", 0, 0, c(1, -1)), reward("p1", 1, 0, c(1, -1)),
		reward("p2", 0, 1, c(1, 0)), reward("p2", 1, 0, c(0, 0))}
	accuracy := &tables.Correctness{Component: "accuracy", Threshold: 0.5}
	tests := []struct {
		name            string
		opts            *HealthOptions
		all, none, some float64
	}{
		{name: "default: the total above 0", opts: nil, all: 0, none: 0.5, some: 0.5},
		{name: "default ignores PassThreshold", opts: &HealthOptions{PassThreshold: 0.99}, all: 0, none: 0.5, some: 0.5},
		{name: "declared accuracy", opts: &HealthOptions{Correct: accuracy}, all: 0.5, none: 0, some: 0.5},
		{name: "declared total at least 1", opts: &HealthOptions{Correct: &tables.Correctness{Threshold: 1}}, all: 0, none: 0.5, some: 0.5},
		{name: "declared total at least -1", opts: &HealthOptions{Correct: &tables.Correctness{Threshold: -1}}, all: 1, none: 0, some: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := ComputeHealth(1, trajs, rws, nil, tc.opts)
			if h.FracSolvedAll != tc.all || h.FracSolvedNone != tc.none || h.FracMixed != tc.some {
				t.Errorf("solved all %v, none %v, mixed %v; want %v, %v, %v", h.FracSolvedAll, h.FracSolvedNone, h.FracMixed, tc.all, tc.none, tc.some)
			}
		})
	}
}
