package tiny

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/rlpipe/rlpipe/policy"
)

// Problem is an addition problem a+b with operands in 0..999.
type Problem struct{ A, B int }

// Prompt returns the problem as the model reads it: "a+b=".
func (p Problem) Prompt() string { return p.text() + "=" }

// Answer returns the sum in decimal, the completion the model should
// produce (before EOS).
func (p Problem) Answer() string { return strconv.Itoa(p.A + p.B) }

func (p Problem) text() string { return strconv.Itoa(p.A) + "+" + strconv.Itoa(p.B) }

// HeldOut reports whether the problem a+b belongs to the held-out split,
// which pretraining never sees: it does iff the 32-bit FNV-1a hash of the
// ASCII text "a+b" (decimal, no leading zeros, no spaces, no "=") is
// divisible by 10. About one problem in ten is held out; a+b and b+a are
// decided separately. In Python:
//
//	def held_out(a, b):
//	    h = 0x811c9dc5
//	    for c in f"{a}+{b}".encode():
//	        h = ((h ^ c) * 0x01000193) & 0xffffffff
//	    return h % 10 == 0
func HeldOut(a, b int) bool { return heldOutText(Problem{a, b}.text()) }

// heldOutText is the held-out rule on a problem's text: its 32-bit
// FNV-1a hash is divisible by 10.
func heldOutText(s string) bool {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()%10 == 0
}

// TrainingProblem draws a problem outside the held-out split, operands
// uniform in 0..999 (rejecting held-out pairs).
func TrainingProblem(rng *rand.Rand) Problem {
	for {
		p := Problem{rng.IntN(1000), rng.IntN(1000)}
		if !HeldOut(p.A, p.B) {
			return p
		}
	}
}

// HeldOutProblems returns the first n distinct held-out problems drawn by
// a PCG seeded (2024, 1) with operands uniform in 0..999: a fixed
// evaluation set, the same for every caller.
func HeldOutProblems(n int) []Problem {
	rng := rand.New(rand.NewPCG(2024, 1))
	return firstDistinct(n, func() Problem { return Problem{rng.IntN(1000), rng.IntN(1000)} },
		func(p Problem) bool { return HeldOut(p.A, p.B) })
}

// firstDistinct returns the first n distinct values draw gives that keep
// accepts.
func firstDistinct[P comparable](n int, draw func() P, keep func(P) bool) []P {
	seen := map[P]bool{}
	out := make([]P, 0, n)
	for len(out) < n {
		p := draw()
		if keep(p) && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// Example returns the problem as a training example: prompt "a+b=",
// completion the answer and EOS.
func (m *Model) Example(p Problem) (Example, error) {
	prompt, err := m.Tokenize(p.Prompt())
	if err != nil {
		return Example{}, err
	}
	ans, err := m.Tokenize(p.Answer())
	if err != nil {
		return Example{}, err
	}
	return Example{Prompt: prompt, Completion: append(ans, EOS)}, nil
}

// ChainExample returns the second turn of a running sum as a training
// example: prompt "a+b=S", EOS, "S+d=" — the first answer as the model
// ends it, then the next problem as environments/arith's Chain restates
// it — and completion S+d and EOS.
func (m *Model) ChainExample(p Problem, d int) (Example, error) {
	s := p.A + p.B
	first, err := m.Tokenize(p.Prompt() + strconv.Itoa(s))
	if err != nil {
		return Example{}, err
	}
	next, err := m.Tokenize(strconv.Itoa(s) + "+" + strconv.Itoa(d) + "=")
	if err != nil {
		return Example{}, err
	}
	ans, err := m.Tokenize(strconv.Itoa(s + d))
	if err != nil {
		return Example{}, err
	}
	prompt := append(append(first, EOS), next...)
	return Example{Prompt: prompt, Completion: append(ans, EOS)}, nil
}

// PassProbabilities returns, for each problem, the probability that one
// sample at temperature 1 (no top-p) is exactly the answer followed by
// EOS: exp of the sum of the teacher-forced log-probabilities.
func (m *Model) PassProbabilities(ctx context.Context, a *Adapter, problems []Problem) ([]float64, error) {
	batch := make([]Example, len(problems))
	for i, p := range problems {
		e, err := m.Example(p)
		if err != nil {
			return nil, fmt.Errorf("problem %d: %w", i, err)
		}
		batch[i] = e
	}
	return m.completionProbabilities(ctx, a, batch)
}

// completionProbabilities returns, for each example, the probability that
// one sample at temperature 1 (no top-p) is exactly its completion: exp of
// the sum of the teacher-forced log-probabilities.
func (m *Model) completionProbabilities(ctx context.Context, a *Adapter, batch []Example) ([]float64, error) {
	lp, _, err := m.Score(ctx, a, batch)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(batch))
	for i, l := range lp {
		var s float64
		for _, v := range l {
			s += float64(v)
		}
		out[i] = math.Exp(s)
	}
	return out, nil
}

// ExpectedPass1 returns the exact expected pass@1 at temperature 1 over the
// problems: the mean of PassProbabilities, free of sampling noise.
func (m *Model) ExpectedPass1(ctx context.Context, a *Adapter, problems []Problem) (float64, error) {
	ps, err := m.PassProbabilities(ctx, a, problems)
	if err != nil {
		return 0, err
	}
	return mean(ps), nil
}

// mean is the mean of ps, 0 for none.
func mean(ps []float64) float64 {
	if len(ps) == 0 {
		return 0
	}
	var s float64
	for _, p := range ps {
		s += p
	}
	return s / float64(len(ps))
}

// GreedyAccuracy returns the fraction of problems whose greedy completion
// is exactly the answer.
func (m *Model) GreedyAccuracy(ctx context.Context, a *Adapter, problems []Problem) (float64, error) {
	prompts, answers := make([]string, len(problems)), make([]string, len(problems))
	for i, p := range problems {
		prompts[i], answers[i] = p.Prompt(), p.Answer()
	}
	return m.greedyAccuracy(ctx, a, prompts, answers, 6)
}

// greedyAccuracy returns the fraction of prompts whose greedy completion
// of at most maxTokens tokens is exactly its answer.
func (m *Model) greedyAccuracy(ctx context.Context, a *Adapter, prompts, answers []string, maxTokens int) (float64, error) {
	reqs := make([]policy.Request, len(prompts))
	for i, p := range prompts {
		reqs[i] = policy.Request{ID: p, Prompt: p}
	}
	out, err := m.Generate(ctx, a, reqs, policy.Sampling{MaxTokens: maxTokens})
	if err != nil {
		return 0, err
	}
	if len(prompts) == 0 {
		return 0, nil
	}
	right := 0
	for i, ans := range answers {
		if s := out[i][0]; s.Status == policy.StatusOK && s.FinishReason == policy.FinishStop && s.Text == ans {
			right++
		}
	}
	return float64(right) / float64(len(prompts)), nil
}
