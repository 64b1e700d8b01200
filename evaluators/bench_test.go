package evaluators

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// benchProblems is 1M eval samples: 62,500 problems × 16 samples, each
// correct with a probability drawn per problem, answers among 4 strings.
func benchProblems(problems, n int) []Problem {
	rng := rand.New(rand.NewPCG(1, 2))
	answers := []string{"10", "11", "12", "13"}
	out := make([]Problem, problems)
	for i := range out {
		p := rng.Float64()
		out[i].ID = fmt.Sprintf("p%06d", i)
		out[i].Samples = make([]tables.EvalSample, n)
		for s := range out[i].Samples {
			ok := rng.Float64() < p
			a := answers[1+rng.IntN(3)]
			if ok {
				a = answers[0]
			}
			r := 0.0
			if ok {
				r = 1
			}
			out[i].Samples[s] = tables.EvalSample{ProblemID: out[i].ID, SampleIndex: int32(s), Answer: a, Correct: ok, Reward: r, Status: tables.StatusOK}
		}
	}
	return out
}

func reportRows(b *testing.B, rows int) {
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkSummarize1M is the whole eval_summary of 1M samples at k 1, 4,
// 8 and 16: avg@k, maj@k, pass@k and pass^k with bootstrap intervals.
func BenchmarkSummarize1M(b *testing.B) {
	probs := benchProblems(62_500, 16)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := Summarize("ckpt", "heldout", probs, []int{1, 4, 8, 16}, shipped); err != nil {
			b.Fatal(err)
		}
	}
	reportRows(b, 1_000_000)
}

// BenchmarkPassAtK1M is the pass@k estimates alone (no interval): the
// aggregation's floor.
func BenchmarkPassAtK1M(b *testing.B) {
	probs := benchProblems(62_500, 16)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, k := range []int{1, 4, 8, 16} {
			sum := 0.0
			for _, p := range probs {
				c := 0
				for _, s := range p.Samples {
					if s.Correct {
						c++
					}
				}
				v, err := PassAtK(len(p.Samples), c, k)
				if err != nil {
					b.Fatal(err)
				}
				sum += v
			}
			_ = sum / float64(len(probs))
		}
	}
	reportRows(b, 1_000_000)
}

// BenchmarkBootstrap62500 is one 95% interval over 62,500 per-problem
// values (2,000 resamples): Summarize computes 16 of them.
func BenchmarkBootstrap62500(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	v := make([]float64, 62_500)
	for i := range v {
		v[i] = rng.Float64()
	}
	b.ReportAllocs()
	for b.Loop() {
		Bootstrap(v, 0)
	}
}
