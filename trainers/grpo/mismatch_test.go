package grpo

import (
	"math"
	"testing"
)

// The mismatch figures of a batch computed by hand: ρ = 2 and 1/2 on one
// sequence, 1 on the other's trainable token, whose observation token
// (ρ = e^5, not trainable) counts in nothing. k3 = ρ − 1 − log ρ sums to
// (1 − ln 2) + (ln 2 − 1/2) + 0 = 1/2 over 3 tokens.
func TestLossMismatchExact(t *testing.T) {
	ln2 := math.Ln2
	seqs := []Sequence{
		{Logprobs: []float64{-1 + ln2, -1 - ln2}, OldLogprobs: []float32{-1, -1}, Advantage: 1},
		{Logprobs: []float64{-2, 3}, OldLogprobs: []float32{-2, -2}, Advantage: -1, Trainable: []bool{true, false}},
	}
	st, _, err := Loss(seqs, LossOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(st.BehaviourKL-0.5/3) > 1e-15 {
		t.Errorf("behaviour kl %.17g, want 1/6", st.BehaviourKL)
	}
	if math.Abs(st.RatioMax-2) > 1e-15 {
		t.Errorf("ratio max %.17g, want 2 (the untrainable e^5 left out)", st.RatioMax)
	}
	if st.ClipHigh != 1.0/3 || st.ClipLow != 0 || st.Tokens != 3 {
		t.Errorf("clip fractions low %v high %v over %d tokens, want 0, 1/3 over 3", st.ClipLow, st.ClipHigh, st.Tokens)
	}
}

func TestMismatchOf(t *testing.T) {
	steps := []LossStats{
		{BehaviourKL: 0.2, RatioMax: 1.5, Tokens: 3},
		{BehaviourKL: 0.6, RatioMax: 2.5, Tokens: 1},
		{BehaviourKL: 9, RatioMax: 1.1, Tokens: 4}, // a second epoch: not the mismatch
	}
	cases := []struct {
		name       string
		steps      []LossStats
		firstEpoch int
		want       OffPolicy
	}{
		{"no step", nil, 0, OffPolicy{}},
		{"one step", steps[:1], 1, OffPolicy{MismatchKL: 0.2, RatioMax: 1.5}},
		{"two minibatches, two epochs", steps, 2, OffPolicy{MismatchKL: (0.2*3 + 0.6) / 4, RatioMax: 2.5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := MismatchOf(tc.steps, tc.firstEpoch)
			if math.Abs(got.MismatchKL-tc.want.MismatchKL) > 1e-15 || got.RatioMax != tc.want.RatioMax {
				t.Errorf("MismatchOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Dual-clip by hand: with A = −1 and c = 3, ρ = e^1.5 ≈ 4.48 (> c) adds
// c·1 = 3 with no gradient and counts as dual-clipped; ρ = e^0.5 ≈ 1.65
// (< c, above 1+ε so the ordinary clip does not bind for A < 0) adds ρ
// with gradient ρ/n; a positive-advantage token with ρ = e^1.5 is clipped
// high as without dual-clip. Off, the first token adds e^1.5 with its
// gradient.
func TestLossDualClipExact(t *testing.T) {
	seqs := []Sequence{
		{Logprobs: []float64{0.5, -0.5}, OldLogprobs: []float32{-1, -1}, Advantage: -1},
		{Logprobs: []float64{0.5}, OldLogprobs: []float32{-1}, Advantage: 1},
	}
	e15, e05 := math.Exp(1.5), math.Exp(0.5)
	cases := []struct {
		name     string
		dual     float64
		loss     float64
		grad0    float64
		clipDual *float64
	}{
		{"off", 0, (e15 + e05 - 1.2) / 3, e15 / 3, nil},
		{"c = 3", 3, (3 + e05 - 1.2) / 3, 0, ptr(1.0 / 3)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, g, err := Loss(seqs, LossOptions{DualClip: tc.dual})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(st.Loss-tc.loss) > 1e-12 || math.Abs(g[0][0]-tc.grad0) > 1e-12 || math.Abs(g[0][1]-e05/3) > 1e-12 {
				t.Errorf("loss %.15g grads %v, want %.15g and [%.15g %.15g]", st.Loss, g[0], tc.loss, tc.grad0, e05/3)
			}
			if (st.ClipDual == nil) != (tc.clipDual == nil) || (st.ClipDual != nil && *st.ClipDual != *tc.clipDual) {
				t.Errorf("clip_frac_dual %v, want %v", st.ClipDual, tc.clipDual)
			}
			if st.ClipHigh != 1.0/3 || st.ClipLow != 0 {
				t.Errorf("clip fractions low %v high %v, want 0 and 1/3", st.ClipLow, st.ClipHigh)
			}
		})
	}
	if _, _, err := Loss(seqs, LossOptions{DualClip: 0.9}); err == nil || err.Error() != "grpo: dual clip 0.9 must be above 1 (0 turns it off)" {
		t.Errorf("dual clip 0.9: %v", err)
	}
}

func ptr(x float64) *float64 { return &x }
