package grpo

import (
	"math"
	"testing"
)

// figure reads an optional figure, failing when it is absent.
func figure(t *testing.T, name string, p *float64) float64 {
	t.Helper()
	if p == nil {
		t.Fatalf("%s is absent", name)
	}
	return *p
}

// Bypass mode by hand: the anchor is the behaviour policy, so the IS
// weights are the ratios 3, 0.6 and 1.5 (the second sequence's
// observation token, ratio e^7, counts in nothing): reported, capped at 2,
// not applied. token_k1 at 2 keeps ratios in [0.5, 2], dropping the 3:
// its token leaves the loss but still counts in the mismatch figures.
func TestRolloutCorrectionBypassExact(t *testing.T) {
	seqs := []Sequence{
		{Logprobs: []float64{-1 + math.Log(3), -1 + math.Log(0.6)}, OldLogprobs: []float32{-1, -1}, Advantage: 1},
		{Logprobs: []float64{-2 + math.Log(1.5), 5}, OldLogprobs: []float32{-2, -2}, Advantage: -1, Trainable: []bool{true, false}},
	}
	st, g, err := Loss(seqs, LossOptions{Correction: RolloutCorrection{IS: ISToken, RS: "token_k1", RSThreshold: 2}})
	if err != nil {
		t.Fatal(err)
	}
	// Kept: ρ 0.6 with A 1 (−0.6, unclipped: min(0.6, 0.8)) and ρ 1.5
	// with A −1 (+1.5, unclipped: min(−1.5, −1.2)), over 2 tokens.
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"loss", st.Loss, (-0.6 + 1.5) / 2},
		{"grad 0 0 (rejected)", g[0][0], 0},
		{"grad 0 1", g[0][1], -0.6 / 2},
		{"grad 1 0", g[1][0], 1.5 / 2},
		{"rollout_is_mean", figure(t, "rollout_is_mean", st.ISMean), (2 + 0.6 + 1.5) / 3},
		{"rollout_is_max", figure(t, "rollout_is_max", st.ISMax), 2},
		{"rollout_is_capped_frac", figure(t, "rollout_is_capped_frac", st.ISCapped), 1.0 / 3},
		{"rollout_rs_masked_frac", figure(t, "rollout_rs_masked_frac", st.RSMasked), 1.0 / 3},
		{"rollout_rs_seq_masked_frac", figure(t, "rollout_rs_seq_masked_frac", st.RSSeqMasked), 1.0 / 2},
		{"ratio_max (the rejected token counts)", st.RatioMax, 3},
		{"behaviour_kl over 3 tokens", st.BehaviourKL, ((2 - math.Log(3)) + (-0.4 - math.Log(0.6)) + (0.5 - math.Log(1.5))) / 3},
	} {
		if math.Abs(c.got-c.want) > 1e-12 {
			t.Errorf("%s: %.17g, want %.17g", c.name, c.got, c.want)
		}
	}
	if st.Tokens != 2 || st.Scored != 3 {
		t.Errorf("%d tokens in the loss of %d scored, want 2 of 3", st.Tokens, st.Scored)
	}
}

// Decoupled mode by hand: the trainer's anchor equals the current policy
// (ρ = 1, so the clipped surrogate is −A per token) and the behaviour
// policy is log 3 and log 0.6 away from it: the weights multiply the
// policy term, each token's own (3 capped at 2) or the sequence's product
// 1.8 (capped at 1.5 when the cap is 1.5).
func TestRolloutCorrectionDecoupledExact(t *testing.T) {
	seqs := []Sequence{{Logprobs: []float64{-1, -1}, OldLogprobs: []float32{-1, -1},
		BehaviourLogprobs: []float32{float32(-1 - math.Log(3)), float32(-1 - math.Log(0.6))}, Advantage: 1}}
	// The float32 behaviour logprobs round the weights: tolerances of 1e-6.
	for _, c := range []struct {
		name     string
		c        RolloutCorrection
		loss     float64
		grads    []float64
		mean, mx float64
		capped   float64
	}{
		{"token, cap 2", RolloutCorrection{IS: ISToken}, -(2 + 0.6) / 2, []float64{-1, -0.3}, 1.3, 2, 0.5},
		{"sequence, cap 2", RolloutCorrection{IS: ISSequence}, -1.8, []float64{-0.9, -0.9}, 1.8, 1.8, 0},
		{"sequence, cap 1.5", RolloutCorrection{IS: ISSequence, ISThreshold: 1.5}, -1.5, []float64{-0.75, -0.75}, 1.5, 1.8, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, g, err := Loss(seqs, LossOptions{Correction: c.c})
			if err != nil {
				t.Fatal(err)
			}
			got := []float64{st.Loss, g[0][0], g[0][1], figure(t, "mean", st.ISMean), figure(t, "max", st.ISMax), figure(t, "capped", st.ISCapped)}
			want := []float64{c.loss, c.grads[0], c.grads[1], c.mean, c.mx, c.capped}
			for i := range got {
				if math.Abs(got[i]-want[i]) > 1e-6 {
					t.Errorf("loss, grads, mean, max, capped: %v, want %v", got, want)
					break
				}
			}
			if st.RSMasked != nil {
				t.Errorf("rollout_rs_masked_frac %v without rollout_rs", *st.RSMasked)
			}
		})
	}
}

// A rejection that drops every token leaves a zero loss with no
// gradient, and the mismatch figures of the tokens it dropped.
func TestRolloutCorrectionRejectsAll(t *testing.T) {
	seqs := []Sequence{{Logprobs: []float64{-1 + math.Log(3)}, OldLogprobs: []float32{-1}, Advantage: 1}}
	st, g, err := Loss(seqs, LossOptions{Correction: RolloutCorrection{RS: "seq_max_k3", RSThreshold: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Loss != 0 || st.Tokens != 0 || figure(t, "masked", st.RSMasked) != 1 || math.Abs(st.RatioMax-3) > 1e-12 {
		t.Errorf("loss %v over %d tokens, masked %v, ratio max %v; want 0, 0, 1, 3", st.Loss, st.Tokens, *st.RSMasked, st.RatioMax)
	}
	if g[0] != nil {
		t.Errorf("gradient %v, want none", g[0])
	}
}

// Options that cannot work are errors naming verl's key; Loss refuses
// them and behaviour logprobs of the wrong length.
func TestRolloutCorrectionBadOptions(t *testing.T) {
	for _, c := range []struct {
		name string
		c    RolloutCorrection
		want string
	}{
		{"unknown level", RolloutCorrection{IS: "tokens"}, `rollout_is: "tokens"; use token or sequence (verl's rollout_is levels)`},
		{"negative cap", RolloutCorrection{IS: ISToken, ISThreshold: -1}, `rollout_is_threshold: -1; it must be positive (2 is verl's default)`},
		{"cap without level", RolloutCorrection{ISThreshold: 3}, `rollout_is_threshold: 3 without rollout_is; set rollout_is: token or sequence, or remove it`},
		{"unknown statistic", RolloutCorrection{RS: "geometric", RSThreshold: 2}, `rollout_rs: "geometric"; use one of token_k1, token_k2, token_k3, seq_sum_k1, seq_sum_k2, seq_sum_k3, seq_mean_k1, seq_mean_k2, seq_mean_k3, seq_max_k2, seq_max_k3 (verl's rollout_rs names)`},
		{"statistic without threshold", RolloutCorrection{RS: "token_k3"}, `rollout_rs: token_k3 needs rollout_rs_threshold (e.g. 2 for a k1 statistic: ratios in [1/2, 2])`},
		{"negative threshold", RolloutCorrection{RS: "token_k3", RSThreshold: -1}, `rollout_rs_threshold: -1; rollout_rs token_k3 needs a positive threshold (e.g. 2 for a k1 statistic)`},
		{"threshold without statistic", RolloutCorrection{RSThreshold: 2}, `rollout_rs_threshold: 2 without rollout_rs; set rollout_rs (e.g. token_k1), or remove it`},
		{"lower bound of k3", RolloutCorrection{RS: "token_k3", RSThreshold: 0.1, RSThresholdLower: 0.05}, `rollout_rs_threshold_lower: 0.05; only the k1 statistics have a lower bound, not token_k3`},
		{"lower above upper", RolloutCorrection{RS: "seq_mean_k1", RSThreshold: 1.5, RSThresholdLower: 2}, `rollout_rs_threshold_lower: 2; it must be positive and at most rollout_rs_threshold 1.5`},
		{"NaN cap", RolloutCorrection{IS: ISSequence, ISThreshold: math.NaN()}, `rollout_is_threshold: NaN; it must be positive (2 is verl's default)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Loss([]Sequence{{Logprobs: []float64{-1}, OldLogprobs: []float32{-1}}}, LossOptions{Correction: c.c})
			if want := "grpo: rollout correction: " + c.want; err == nil || err.Error() != want {
				t.Errorf("error %v, want %s", err, want)
			}
		})
	}
	_, _, err := Loss([]Sequence{{Logprobs: []float64{-1, -1}, OldLogprobs: []float32{-1, -1}, BehaviourLogprobs: []float32{-1}}}, LossOptions{})
	if want := "grpo: sequence 0 has 1 behaviour logprobs for 2 tokens"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

// RolloutOf weighs the first epoch's steps by their tokens and
// sequences and leaves the later epochs out.
func TestRolloutOf(t *testing.T) {
	p := func(x float64) *float64 { return &x }
	steps := []LossStats{
		{RolloutFigures: RolloutFigures{ISMean: p(1), ISMax: p(2), ISCapped: p(0.5), RSMasked: p(0.25), RSSeqMasked: p(0.5), Tokens: 4, Seqs: 2}},
		{RolloutFigures: RolloutFigures{ISMean: p(2), ISMax: p(3), ISCapped: p(0), RSMasked: p(1), RSSeqMasked: p(1), Tokens: 1, Seqs: 2}},
		{RolloutFigures: RolloutFigures{ISMean: p(9), ISMax: p(9), ISCapped: p(1), RSMasked: p(1), RSSeqMasked: p(1), Tokens: 5, Seqs: 5}},
	}
	f := RolloutOf(steps, 2)
	got := []float64{*f.ISMean, *f.ISMax, *f.ISCapped, *f.RSMasked, *f.RSSeqMasked}
	want := []float64{(4 + 2) / 5.0, 3, 2 / 5.0, (1 + 1) / 5.0, (1 + 2) / 4.0}
	for i := range got {
		if math.Abs(got[i]-want[i]) > 1e-15 {
			t.Errorf("mean, max, capped, masked, seq masked: %v, want %v", got, want)
			break
		}
	}
	if off := RolloutOf([]LossStats{{Tokens: 3}}, 1); off.ISMean != nil || off.RSMasked != nil {
		t.Errorf("figures %+v without the correction, want none", off)
	}
}

// Reinforce takes the IS weights in bypass mode (verl's bypass_pg_is):
// the ratios 3, 0.6 and 1.5 of TestRolloutCorrectionBypassExact, capped
// at 2, multiply −A·logπ and its gradient −A.
func TestRolloutCorrectionReinforceExact(t *testing.T) {
	lp := []float64{-1 + math.Log(3), -1 + math.Log(0.6), -2 + math.Log(1.5)}
	seqs := []Sequence{
		{Logprobs: lp[:2], OldLogprobs: []float32{-1, -1}, Advantage: 1},
		{Logprobs: []float64{lp[2], 5}, OldLogprobs: []float32{-2, -2}, Advantage: -1, Trainable: []bool{true, false}},
	}
	st, g, err := Loss(seqs, LossOptions{Policy: Reinforce, Correction: RolloutCorrection{IS: ISToken}})
	if err != nil {
		t.Fatal(err)
	}
	got := []float64{st.Loss, g[0][0], g[0][1], g[1][0], g[1][1]}
	want := []float64{(-2*lp[0] - 0.6*lp[1] + 1.5*lp[2]) / 3, -2.0 / 3, -0.6 / 3, 1.5 / 3, 0}
	for i := range got {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Errorf("loss and grads %v, want %v", got, want)
			break
		}
	}
	if st.ClipLow != 0 || st.ClipHigh != 0 {
		t.Errorf("clip fractions %v %v: reinforce clips nothing", st.ClipLow, st.ClipHigh)
	}
}
