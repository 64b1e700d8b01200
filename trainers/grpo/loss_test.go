package grpo

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestLossExact(t *testing.T) {
	// One token each: ratio 1 (no clip), ratio e^0.5 with A>0 (clipped
	// high), ratio e^-0.5 with A<0 (clipped low), ratio e^-0.5 with A>0
	// (below the range, but min keeps the unclipped term).
	seqs := []Sequence{
		{Logprobs: []float64{-1}, OldLogprobs: []float32{-1}, Advantage: 2},
		{Logprobs: []float64{-0.5}, OldLogprobs: []float32{-1}, Advantage: 1},
		{Logprobs: []float64{-1.5}, OldLogprobs: []float32{-1}, Advantage: -1},
		{Logprobs: []float64{-1.5}, OldLogprobs: []float32{-1}, Advantage: 1},
	}
	st, g, err := Loss(seqs, LossOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := math.Exp(-0.5)
	want := (-2 - 1.2*1 + 0.8 - r) / 4
	if math.Abs(st.Loss-want) > 1e-12 || st.Loss != st.PolicyLoss {
		t.Errorf("loss %v, want %v", st.Loss, want)
	}
	wantG := []float64{-2.0 / 4, 0, 0, -r / 4}
	for i := range g {
		if math.Abs(g[i][0]-wantG[i]) > 1e-12 {
			t.Errorf("grad %d = %v, want %v", i, g[i][0], wantG[i])
		}
	}
	if st.ClipHigh != 0.25 || st.ClipLow != 0.25 || st.Tokens != 4 {
		t.Errorf("clip fractions %v %v tokens %d", st.ClipLow, st.ClipHigh, st.Tokens)
	}
	wantDev := (0 + (math.Exp(0.5) - 1) + 2*(1-r)) / 4
	if math.Abs(st.RatioDev-wantDev) > 1e-12 {
		t.Errorf("ratio dev %v, want %v", st.RatioDev, wantDev)
	}
}

func TestLossKL(t *testing.T) {
	seqs := []Sequence{{Logprobs: []float64{-1, -2}, OldLogprobs: []float32{-1, -2}, RefLogprobs: []float64{-1, -1.5}, Advantage: 0}}
	st, _, err := Loss(seqs, LossOptions{Beta: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	k := math.Exp(0.5) - 0.5 - 1 // the second token; the first has δ=0
	if st.KL == nil || math.Abs(*st.KL-k/2) > 1e-12 || math.Abs(st.Loss-0.5*k/2) > 1e-12 {
		t.Errorf("kl %v loss %v, want %v %v", st.KL, st.Loss, k/2, 0.5*k/2)
	}
	if st, _, err := Loss(seqs, LossOptions{}); err != nil || st.KL != nil {
		t.Errorf("β = 0: kl %v (%v), want not computed (nil)", st.KL, err)
	}
	if _, _, err := Loss(seqs[:1:1], LossOptions{Beta: 0.1, Aggregation: "token"}); err != nil {
		t.Fatal(err)
	}
	noRef := []Sequence{{Logprobs: []float64{-1}, OldLogprobs: []float32{-1}}}
	if _, _, err := Loss(noRef, LossOptions{Beta: 0.1}); err == nil {
		t.Error("beta > 0 without reference logprobs accepted")
	}
}

// TestLossGradient checks the analytic gradient against central finite
// differences for both aggregations, with KL, away from the clip kinks.
func TestLossGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, agg := range []Aggregation{TokenMean, SequenceMean} {
		var seqs []Sequence
		for i := 0; i < 5; i++ {
			n := 1 + rng.IntN(4)
			s := Sequence{Advantage: rng.NormFloat64()}
			for j := 0; j < n; j++ {
				old := -rng.Float64() * 3
				s.OldLogprobs = append(s.OldLogprobs, float32(old))
				s.Logprobs = append(s.Logprobs, float64(float32(old))+rng.NormFloat64()*0.3)
				s.RefLogprobs = append(s.RefLogprobs, old+rng.NormFloat64()*0.2)
			}
			seqs = append(seqs, s)
		}
		o := LossOptions{Beta: 0.04, EpsHigh: 0.28, Aggregation: agg}
		_, g, err := Loss(seqs, o)
		if err != nil {
			t.Fatal(err)
		}
		const h = 1e-6
		for i := range seqs {
			for j := range seqs[i].Logprobs {
				x := seqs[i].Logprobs[j]
				seqs[i].Logprobs[j] = x + h
				up, _, _ := Loss(seqs, o)
				seqs[i].Logprobs[j] = x - h
				down, _, _ := Loss(seqs, o)
				seqs[i].Logprobs[j] = x
				num := (up.Loss - down.Loss) / (2 * h)
				if math.Abs(num-g[i][j]) > 1e-6 {
					t.Errorf("%s: d loss / d logp[%d][%d] = %v, finite difference %v", agg, i, j, g[i][j], num)
				}
			}
		}
	}
}

func TestLossSequenceMeanWeighsSequencesEqually(t *testing.T) {
	seqs := []Sequence{
		{Logprobs: []float64{-1}, OldLogprobs: []float32{-1}, Advantage: 1},
		{Logprobs: []float64{-1, -1, -1}, OldLogprobs: []float32{-1, -1, -1}, Advantage: 1},
	}
	tok, _, _ := Loss(seqs, LossOptions{Aggregation: TokenMean})
	seq, _, _ := Loss(seqs, LossOptions{Aggregation: SequenceMean})
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	if !near(tok.Loss, -1) || !near(seq.Loss, -1) {
		t.Errorf("ratio-1 losses: token %v sequence %v, want -1", tok.Loss, seq.Loss)
	}
	seqs[1].Advantage = -1
	tok, _, _ = Loss(seqs, LossOptions{Aggregation: TokenMean})
	seq, _, _ = Loss(seqs, LossOptions{Aggregation: SequenceMean})
	if !near(tok.Loss, 0.5) || !near(seq.Loss, 0) {
		t.Errorf("token %v (want 0.5), sequence %v (want 0)", tok.Loss, seq.Loss)
	}
}

func TestLossNonFinite(t *testing.T) {
	seqs := []Sequence{{Logprobs: []float64{math.NaN()}, OldLogprobs: []float32{-1}, Advantage: 1}}
	if _, _, err := Loss(seqs, LossOptions{}); !errors.Is(err, ErrNonFinite) {
		t.Fatalf("NaN logprob: %v", err)
	}
	seqs = []Sequence{{Logprobs: []float64{800}, OldLogprobs: []float32{-1}, Advantage: -1}}
	if _, _, err := Loss(seqs, LossOptions{}); !errors.Is(err, ErrNonFinite) {
		t.Fatalf("overflowing ratio: %v", err)
	}
}

func TestLossBadOptions(t *testing.T) {
	for _, o := range []LossOptions{{EpsLow: 1}, {Beta: -1}, {Aggregation: "mean"}} {
		if _, _, err := Loss(nil, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

func TestLossShortEntropies(t *testing.T) {
	seqs := []Sequence{{Logprobs: []float64{-1, -2}, OldLogprobs: []float32{-1, -2}, Entropies: []float64{0.5}, Advantage: 1}}
	if _, _, err := Loss(seqs, LossOptions{}); err == nil {
		t.Fatal("one entropy for two tokens was accepted")
	}
}

// Tokens outside the trainable mask (an episode's observations) are as if
// absent: the loss, its statistics and the other tokens' gradients equal
// those of the sequence without them, under either aggregation, and
// their own gradient is 0 whatever their (unread) logprobs hold.
func TestLossTrainableMask(t *testing.T) {
	nan := math.NaN()
	masked := []Sequence{
		{Logprobs: []float64{-1, nan, -0.5, -2}, OldLogprobs: []float32{-1.2, 7, -0.4, -2}, RefLogprobs: []float64{-1, nan, -0.7, -1},
			Entropies: []float64{1, nan, 2, 3}, Advantage: 1.5, Trainable: []bool{true, false, true, true}},
		{Logprobs: []float64{nan, -3}, OldLogprobs: []float32{0, -2.5}, RefLogprobs: []float64{nan, -3.5},
			Entropies: []float64{nan, 4}, Advantage: -0.5, Trainable: []bool{false, true}},
		{Logprobs: []float64{nan}, OldLogprobs: []float32{nan32()}, RefLogprobs: []float64{nan}, Entropies: []float64{nan}, Advantage: 2, Trainable: []bool{false}},
	}
	plain := []Sequence{
		{Logprobs: []float64{-1, -0.5, -2}, OldLogprobs: []float32{-1.2, -0.4, -2}, RefLogprobs: []float64{-1, -0.7, -1}, Entropies: []float64{1, 2, 3}, Advantage: 1.5},
		{Logprobs: []float64{-3}, OldLogprobs: []float32{-2.5}, RefLogprobs: []float64{-3.5}, Entropies: []float64{4}, Advantage: -0.5},
		{Advantage: 2},
	}
	for _, agg := range []Aggregation{TokenMean, SequenceMean} {
		o := LossOptions{Beta: 0.1, Aggregation: agg}
		got, gg, err := Loss(masked, o)
		if err != nil {
			t.Fatalf("%s: %v", agg, err)
		}
		want, wg, err := Loss(plain, o)
		if err != nil {
			t.Fatal(err)
		}
		if got.Loss != want.Loss || got.PolicyLoss != want.PolicyLoss || *got.KL != *want.KL || got.Entropy != want.Entropy ||
			got.ClipLow != want.ClipLow || got.ClipHigh != want.ClipHigh || got.RatioDev != want.RatioDev || got.Tokens != 4 || want.Tokens != 4 {
			t.Errorf("%s: masked %+v, want %+v", agg, got, want)
		}
		for i, s := range masked {
			k := 0
			for j, tr := range s.Trainable {
				switch {
				case !tr && gg[i][j] != 0:
					t.Errorf("%s: sequence %d token %d is not trainable but has gradient %v", agg, i, j, gg[i][j])
				case tr && gg[i][j] != wg[i][k]:
					t.Errorf("%s: sequence %d token %d: gradient %v, want %v", agg, i, j, gg[i][j], wg[i][k])
				}
				if tr {
					k++
				}
			}
		}
	}
	bad := []Sequence{{Logprobs: []float64{-1, -1}, OldLogprobs: []float32{-1, -1}, Trainable: []bool{true}}}
	if _, _, err := Loss(bad, LossOptions{}); err == nil || err.Error() != "grpo: sequence 0 has a trainable mask of 1 for 2 tokens" {
		t.Errorf("a mask of the wrong length: %v", err)
	}
}

func nan32() float32 { return float32(math.NaN()) }
