package grpo

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestKLEstimators: each estimator's value and gradient on one token of
// δ = logπ_ref − logπ = 0.5, under verl's name too, and the mean the KL
// figure reports.
func TestKLEstimators(t *testing.T) {
	// Two tokens, δ 0 and 0.5; advantage 0 leaves the KL term alone.
	seqs := []Sequence{{Logprobs: []float64{-1, -2}, OldLogprobs: []float32{-1, -2}, RefLogprobs: []float64{-1, -1.5}}}
	const beta = 0.5
	for _, tc := range []struct {
		est      KLEstimator
		k, dk    float64 // of the δ = 0.5 token
		dkAtZero float64 // ∂k/∂logπ of the δ = 0 token
	}{
		{"", math.Exp(0.5) - 1.5, 1 - math.Exp(0.5), 0},
		{K3, math.Exp(0.5) - 1.5, 1 - math.Exp(0.5), 0},
		{"low_var_kl", math.Exp(0.5) - 1.5, 1 - math.Exp(0.5), 0},
		{K1, -0.5, 1, 1},
		{"kl", -0.5, 1, 1},
		{K2, 0.125, -0.5, 0},
		{"mse", 0.125, -0.5, 0},
	} {
		t.Run(string(tc.est), func(t *testing.T) {
			st, g, err := Loss(seqs, LossOptions{Beta: beta, KL: tc.est})
			if err != nil {
				t.Fatal(err)
			}
			if st.KL == nil || math.Abs(*st.KL-tc.k/2) > 1e-15 || math.Abs(st.Loss-beta*tc.k/2) > 1e-15 {
				t.Errorf("kl %v loss %v, want %v %v", st.KL, st.Loss, tc.k/2, beta*tc.k/2)
			}
			want := []float64{beta * tc.dkAtZero / 2, beta * tc.dk / 2}
			for j := range want {
				if math.Abs(g[0][j]-want[j]) > 1e-15 {
					t.Errorf("∂loss/∂logπ of token %d: %v, want %v", j, g[0][j], want[j])
				}
			}
		})
	}
}

// The default k3 and its names compute exactly what Loss computed before
// estimators were a choice: e^δ − δ − 1 and 1 − e^δ, bit for bit.
func TestKLK3Unchanged(t *testing.T) {
	for _, d := range []float64{-3.25, -0.1, 0, 1e-9, 0.37, 2.5} {
		e := math.Exp(d)
		k, dk := K3.term(d)
		if k != e-d-1 || dk != 1-e {
			t.Errorf("δ %v: k3 %v ∂ %v, want %v %v", d, k, dk, e-d-1, 1-e)
		}
	}
}

// TestEntropyBonus: the bonus −c·H per trainable token under each
// aggregation, its gradient with respect to the entropies (−c times the
// token's weight), and no change to the logprobs' gradient or to
// PolicyLoss.
func TestEntropyBonus(t *testing.T) {
	seqs := []Sequence{
		{Logprobs: []float64{-1, -2}, OldLogprobs: []float32{-1, -2}, Entropies: []float64{1.5, 0.5}, Advantage: 1},
		{Logprobs: []float64{-1, -3, -1}, OldLogprobs: []float32{-1, -3, -1}, Entropies: []float64{2, 9, 1}, Advantage: -1,
			Trainable: []bool{true, false, true}},
	}
	const c = 0.1
	for _, tc := range []struct {
		agg   Aggregation
		w     [2]float64 // each sequence's token weight
		bonus float64    // Σ w·H over trainable tokens
	}{
		{TokenMean, [2]float64{0.25, 0.25}, (1.5 + 0.5 + 2 + 1) / 4},
		{SequenceMean, [2]float64{0.25, 0.25}, (1.5+0.5)/4 + (2.0+1)/4},
		{SeqMeanTokenSumNorm, [2]float64{1.0 / 6, 1.0 / 6}, (1.5 + 0.5 + 2 + 1) / 6},
	} {
		t.Run(string(tc.agg), func(t *testing.T) {
			plain, pg, err := Gradient(seqs, LossOptions{Aggregation: tc.agg})
			if err != nil {
				t.Fatal(err)
			}
			if pg.Entropies != nil {
				t.Errorf("no bonus: entropy gradients %v, want nil", pg.Entropies)
			}
			st, g, err := Gradient(seqs, LossOptions{Aggregation: tc.agg, EntropyCoeff: c})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(st.Loss-(plain.Loss-c*tc.bonus)) > 1e-15 || st.PolicyLoss != plain.PolicyLoss || st.Entropy != 5.0/4 {
				t.Errorf("loss %v policy %v entropy %v, want %v %v 1.25", st.Loss, st.PolicyLoss, st.Entropy, plain.Loss-c*tc.bonus, plain.PolicyLoss)
			}
			for i, s := range seqs {
				for j := range s.Logprobs {
					want := -c * tc.w[i]
					if !s.trains(j) {
						want = 0
					}
					if math.Abs(g.Entropies[i][j]-want) > 1e-15 {
						t.Errorf("∂loss/∂H of sequence %d token %d: %v, want %v", i, j, g.Entropies[i][j], want)
					}
					if g.Logprobs[i][j] != pg.Logprobs[i][j] {
						t.Errorf("∂loss/∂logπ of sequence %d token %d: %v with the bonus, %v without", i, j, g.Logprobs[i][j], pg.Logprobs[i][j])
					}
				}
			}
		})
	}
}

// TestEntropyBonusGradient checks ∂loss/∂H against central differences
// with the KL (k1, k2, k3) and the bonus together.
func TestEntropyBonusGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var seqs []Sequence
	for i := 0; i < 4; i++ {
		s := Sequence{Advantage: rng.NormFloat64()}
		for j := 0; j < 1+rng.IntN(4); j++ {
			old := -rng.Float64() * 3
			s.OldLogprobs = append(s.OldLogprobs, float32(old))
			s.Logprobs = append(s.Logprobs, float64(float32(old))+rng.NormFloat64()*0.3)
			s.RefLogprobs = append(s.RefLogprobs, old+rng.NormFloat64()*0.2)
			s.Entropies = append(s.Entropies, 2*rng.Float64())
		}
		seqs = append(seqs, s)
	}
	for _, est := range KLEstimators {
		for _, agg := range Aggregations {
			o := LossOptions{Beta: 0.04, KL: est, EntropyCoeff: 0.03, EpsHigh: 0.28, Aggregation: agg}
			_, g, err := Gradient(seqs, o)
			if err != nil {
				t.Fatal(err)
			}
			const h = 1e-6
			diff := func(v *float64) float64 {
				x := *v
				*v = x + h
				up, _, _ := Loss(seqs, o)
				*v = x - h
				down, _, _ := Loss(seqs, o)
				*v = x
				return (up.Loss - down.Loss) / (2 * h)
			}
			for i := range seqs {
				for j := range seqs[i].Logprobs {
					if num := diff(&seqs[i].Logprobs[j]); math.Abs(num-g.Logprobs[i][j]) > 1e-6 {
						t.Errorf("%s %s: ∂loss/∂logπ[%d][%d] = %v, finite difference %v", est, agg, i, j, g.Logprobs[i][j], num)
					}
					if num := diff(&seqs[i].Entropies[j]); math.Abs(num-g.Entropies[i][j]) > 1e-6 {
						t.Errorf("%s %s: ∂loss/∂H[%d][%d] = %v, finite difference %v", est, agg, i, j, g.Entropies[i][j], num)
					}
				}
			}
		}
	}
}

// Bad estimators, coefficients and missing entropies fail with a message
// naming what is wrong.
func TestKLEntropyBadOptions(t *testing.T) {
	seqs := []Sequence{{Logprobs: []float64{-1}, OldLogprobs: []float32{-1}, RefLogprobs: []float64{-1}, Advantage: 1}}
	for _, tc := range []struct {
		name string
		o    LossOptions
		want string
	}{
		{"unknown estimator", LossOptions{Beta: 0.1, KL: "k4"},
			`grpo: "k4": unknown kl estimator (use k1, k2 or k3; verl's kl, mse and low_var_kl are the same)`},
		{"negative entropy coefficient", LossOptions{EntropyCoeff: -0.01}, "grpo: entropy coefficient -0.01 must be finite and ≥ 0"},
		{"NaN entropy coefficient", LossOptions{EntropyCoeff: math.NaN()}, "grpo: entropy coefficient NaN must be finite and ≥ 0"},
		{"infinite entropy coefficient", LossOptions{EntropyCoeff: math.Inf(1)}, "grpo: entropy coefficient +Inf must be finite and ≥ 0"},
		{"a bonus without entropies", LossOptions{EntropyCoeff: 0.01}, "grpo: sequence 0 has no entropies (an entropy bonus needs one per token)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Loss(seqs, tc.o)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	// A non-finite entropy under a bonus makes the loss non-finite.
	seqs[0].Entropies = []float64{math.Inf(1)}
	if _, _, err := Loss(seqs, LossOptions{EntropyCoeff: 0.01}); err == nil || err.Error() != "grpo: loss -Inf over 1 tokens (mean |ratio-1| 0): non-finite loss; the step is not applied" {
		t.Errorf("an infinite entropy: %v", err)
	}
}
