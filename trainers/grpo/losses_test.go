package grpo_test

import (
	"math"
	"testing"

	"github.com/rlpipe/rlpipe/trainers/grpo"
	"github.com/rlpipe/rlpipe/trainers/grpo/losstest"
)

func TestLossSuite(t *testing.T) {
	for _, s := range []losstest.Suite{
		{Loss: grpo.PPOClip, RatioSurrogate: true},
		{Loss: grpo.GSPO, RatioSurrogate: true},
		{Loss: grpo.CISPO},
		{Loss: grpo.Reinforce},
	} {
		t.Run(s.Loss.Name(), func(t *testing.T) { losstest.Run(t, s) })
	}
}

// TestPolicyLossesExact works two sequences out by hand under each loss:
// one of two tokens with A = 1 whose log-ratios are 0.3 and 0.1, one of
// one token with A = −1 and log-ratio −0.5 (clipped low by PPO and GSPO).
func TestPolicyLossesExact(t *testing.T) {
	seqs := func() []grpo.Sequence {
		return []grpo.Sequence{
			{Logprobs: []float64{-0.7, -1.9}, OldLogprobs: []float32{-1, -2}, Advantage: 1},
			{Logprobs: []float64{-1.5}, OldLogprobs: []float32{-1}, Advantage: -1},
		}
	}
	// The old logprobs are float32: recompute the log-ratios from them.
	x00, x01 := -0.7-float64(float32(-1)), -1.9-float64(float32(-2))
	s0 := math.Exp((x00 + x01) / 2)
	for _, tc := range []struct {
		name     string
		loss     grpo.PolicyLoss
		agg      grpo.Aggregation
		want     float64
		wantG    [][]float64
		low, hig float64
	}{
		{name: "ppo_clip token", loss: grpo.PPOClip, agg: grpo.TokenMean,
			// ρ = e^0.3 > 1.2: clipped high; e^0.1 inside; e^−0.5 < 0.8 with A < 0: clipped low.
			want: (-1.2 - math.Exp(x01) + 0.8) / 3, wantG: [][]float64{{0, -math.Exp(x01) / 3}, {0}}, low: 1.0 / 3, hig: 1.0 / 3},
		{name: "gspo sequence", loss: grpo.GSPO, agg: grpo.SequenceMean,
			// s0 = e^0.2 = 1.2214 > 1.2: the whole first sequence is clipped high.
			want: (-1.2 + 0.8) / 2, wantG: [][]float64{{0, 0}, {0}}, low: 1.0 / 3, hig: 2.0 / 3},
		{name: "gspo token, wider range", loss: grpo.GSPO, agg: grpo.TokenMean,
			want: (2*-s0 + 0.8) / 3, wantG: [][]float64{{-s0 / 3, -s0 / 3}, {0}}, low: 1.0 / 3},
		{name: "cispo seq_mean_token_sum_norm", loss: grpo.CISPO, agg: grpo.SeqMeanTokenSumNorm,
			// weights 1.2, e^0.1, 0.8; normaliser 2 sequences × 2 tokens.
			want:  (-1.2*-0.7 - math.Exp(x01)*-1.9 - 0.8*-1*-1.5) / 4,
			wantG: [][]float64{{-1.2 / 4, -math.Exp(x01) / 4}, {0.8 / 4}}, low: 1.0 / 3, hig: 1.0 / 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := grpo.LossOptions{Policy: tc.loss, Aggregation: tc.agg}
			if tc.name == "gspo token, wider range" {
				o.EpsHigh = 0.3
			}
			st, g, err := grpo.Loss(seqs(), o)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(st.PolicyLoss-tc.want) > 1e-12 || st.Loss != st.PolicyLoss {
				t.Errorf("policy loss %v (loss %v), want %v", st.PolicyLoss, st.Loss, tc.want)
			}
			for i := range g {
				for j := range g[i] {
					if math.Abs(g[i][j]-tc.wantG[i][j]) > 1e-12 {
						t.Errorf("grad %d/%d = %v, want %v", i, j, g[i][j], tc.wantG[i][j])
					}
				}
			}
			if math.Abs(st.ClipLow-tc.low) > 1e-12 || math.Abs(st.ClipHigh-tc.hig) > 1e-12 {
				t.Errorf("clip fractions low %v high %v, want %v %v", st.ClipLow, st.ClipHigh, tc.low, tc.hig)
			}
		})
	}
}

func TestLossOptionErrors(t *testing.T) {
	seqs := []grpo.Sequence{{Logprobs: []float64{-1}, OldLogprobs: []float32{-1}, Advantage: 1}}
	for _, tc := range []struct {
		name string
		o    grpo.LossOptions
		want string
	}{
		{name: "dual clip with gspo", o: grpo.LossOptions{Policy: grpo.GSPO, DualClip: 3}, want: "grpo: dual clip applies to the ppo_clip loss only, not gspo"},
		{name: "unknown aggregation", o: grpo.LossOptions{Aggregation: "seq-mean"}, want: `grpo: unknown aggregation "seq-mean" (use token, sequence or seq_mean_token_sum_norm)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := grpo.Loss(seqs, tc.o); err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestAggregationAliases: verl's names of the two first aggregations are
// theirs, so the default named its verl way is the default.
func TestAggregationAliases(t *testing.T) {
	for in, want := range map[grpo.Aggregation]grpo.Aggregation{
		"token_mean": grpo.TokenMean, "seq_mean_token_mean": grpo.SequenceMean, "token": grpo.TokenMean,
		"sequence": grpo.SequenceMean, "seq_mean_token_sum_norm": grpo.SeqMeanTokenSumNorm,
	} {
		if got := in.Canonical(); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
