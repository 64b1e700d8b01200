package tiny

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
)

// The gradient of a tempered example's log-probabilities is that of
// log softmax(z/T): the float64 reference divides the logits by T and the
// finite differences agree, for the base weights and for LoRA factors,
// in a batch that mixes temperatures (0 and 1 untempered).
func TestGradientsTempered(t *testing.T) {
	temps := []float64{1.2, 0.7, 0, 1, 1.5, 2}
	for _, tc := range []struct {
		name string
		lora bool
	}{{"full", false}, {"lora", true}} {
		t.Run(tc.name, func(t *testing.T) {
			m := randomModel(t, smallConfig(), 5)
			var a *Adapter
			if tc.lora {
				a = randomAdapter(t, m, 8)
			}
			batch := testBatch(t, m, len(temps), 5)
			for i := range batch {
				batch[i].Temperature = temps[i]
			}
			tr := weightedGradients(t, m, a, batch)
			rng := rand.New(rand.NewPCG(3, 3))
			var idx []int
			if a == nil {
				for _, p := range m.lo.params {
					idx = append(idx, p.off+rng.IntN(p.size))
				}
			} else {
				for k := 0; k < 40; k++ {
					idx = append(idx, rng.IntN(len(a.flat)))
				}
			}
			checkGrads(t, m, a, batch, tr.grad, idx)
		})
	}
}

// Sampling at T records log softmax(z/T), the numbers Score gives an
// Example of that Temperature, bit for bit; before samplers and trainers
// knew the temperature, both used log softmax(z), and the samples'
// true importance weight π_1(y)/π_T(y) — the correction a trainer of
// π_1 needed for samples of π_T — was treated as 1. On tiny-arith at
// T 1.2 (64 problems × 8 samples, max_tokens 5, as the demo samples)
// that weight leaves [0.8, 1.2] for 60 of 512 sequences (11.7%), its
// inverse π_T/π_1 for 66 (12.9%).
func TestTemperedLogprobsAreScored(t *testing.T) {
	m, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	const temp = 1.2
	rng := rand.New(rand.NewPCG(36, 1))
	var reqs []policy.Request
	for i := 0; i < 64; i++ {
		reqs = append(reqs, policy.Request{ID: string(rune('a' + i%26)), Prompt: TrainingProblem(rng).Prompt(), Seed: int64(i)})
	}
	out, err := NewPolicy(m).Generate(context.Background(), reqs, policy.Sampling{N: 8, Temperature: temp, MaxTokens: 5, Logprobs: true, TopLogprobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	var batch []Example
	var samples []policy.Sample
	for i, r := range reqs {
		prompt, _ := m.Tokenize(r.Prompt)
		for _, s := range out[i] {
			batch = append(batch, Example{Prompt: prompt, Completion: s.TokenIDs, Temperature: temp})
			samples = append(samples, s)
		}
	}
	at, _, err := m.Score(context.Background(), nil, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i := range batch {
		batch[i].Temperature = 1
	}
	raw, _, err := m.Score(context.Background(), nil, batch)
	if err != nil {
		t.Fatal(err)
	}
	outside, inv, differ, tokens := 0, 0, 0, 0
	for i, s := range samples {
		var logW float64
		for j, lp := range s.Logprobs {
			if math.Float32bits(lp) != math.Float32bits(at[i][j]) {
				t.Fatalf("sample %d token %d: recorded %v, scored at T %g %v; want the same bits", i, j, lp, temp, at[i][j])
			}
			if top := s.TopLogprobs[j]; top[0].Logprob < lp || top[0].Logprob < top[1].Logprob {
				t.Fatalf("sample %d token %d: top logprobs %v not the tempered distribution's most likely of %v", i, j, top, lp)
			}
			if raw[i][j] != lp {
				differ++
			}
			tokens++
			logW += float64(raw[i][j]) - float64(lp)
		}
		if w := math.Exp(logW); w < 0.8 || w > 1.2 {
			outside++
		}
		if w := math.Exp(-logW); w < 0.8 || w > 1.2 {
			inv++
		}
	}
	t.Logf("T %g: %d of %d tokens' log-probabilities differ at T 1; true weight outside [0.8, 1.2] for %d of %d sequences (%.1f%%), its inverse for %d",
		temp, differ, tokens, outside, len(samples), 100*float64(outside)/float64(len(samples)), inv)
	if outside != 60 || differ != tokens {
		t.Errorf("%d sequences outside [0.8, 1.2] and %d of %d tokens differing; want 60 and all", outside, differ, tokens)
	}
}

// An Example's temperature must be one the model can divide by.
func TestExampleTemperatureRefused(t *testing.T) {
	m := testModel(t)
	e, err := m.Example(Problem{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		temp float64
		want string
	}{
		{"negative", -0.5, "score: example 0: temperature -0.5: it must be finite and ≥ 0"},
		{"nan", math.NaN(), "score: example 0: temperature NaN: it must be finite and ≥ 0"},
		{"infinite", math.Inf(1), "score: example 0: temperature +Inf: it must be finite and ≥ 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.Temperature = tc.temp
			_, _, err := m.Score(context.Background(), nil, []Example{e})
			if err == nil || err.Error() != tc.want {
				t.Fatalf("err = %v; want %q", err, tc.want)
			}
		})
	}
}
