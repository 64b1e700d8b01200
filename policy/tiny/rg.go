package tiny

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
)

// ModelTinyRG names the shipped base pretrained on reasoning-gym's
// basic_arithmetic family (weights/rg.safetensors, EmbeddedRG).
const ModelTinyRG = "tiny-rg"

// FamilyBasicArithmetic is PretrainConfig.Family for reasoning-gym's
// basic_arithmetic questions of two one-digit terms (RGProblem).
const FamilyBasicArithmetic = "basic_arithmetic"

// RGConfig is tiny-rg's configuration: tiny-arith's architecture with a
// vocabulary that spells reasoning-gym's basic_arithmetic questions as
// they are ("Calculate -( 4 * -3 )."): digits, the four operators,
// parentheses, the space, the full stop and the letters of "Calculate".
// The context is 48, so that parentheses nested five deep still fit.
func RGConfig() Config {
	c := DefaultConfig()
	c.Name, c.Vocab, c.Context = ModelTinyRG, "0123456789+-*/() .Calcute", 48
	return c
}

// DefaultRGPretrainConfig reproduces weights/rg.safetensors byte for
// byte: tiny-arith's settings on RGTrainingProblem's questions, stopped
// early on purpose (see the package documentation).
func DefaultRGPretrainConfig() PretrainConfig {
	c := DefaultPretrainConfig()
	c.Model, c.Family, c.Steps = RGConfig(), FamilyBasicArithmetic, 1000
	return c
}

// RGProblem is a question of reasoning-gym's basic_arithmetic family with
// two terms of one digit (its config min_terms = max_terms = 2,
// min_digits = max_digits = 1, the defaults otherwise: the four
// operators, parentheses and negation allowed, single spaces, the
// "simple" format), with its answer.
type RGProblem struct {
	// Question is the prompt as reasoning-gym words it:
	// "Calculate ( -9 / 9 )."
	Question string
	// Answer is the value in decimal, reasoning-gym's answer: "-1".
	Answer string
}

// RandomRGProblem draws a question from the distribution reasoning-gym's
// generator (reasoning_gym/arithmetic/basic_arithmetic.py,
// _generate_complex_task) has for two one-digit terms — the same texts
// with the same probabilities, not the same rows for a seed; a Go port
// of that much of it, so pretraining needs no Python. Two terms split
// 1+1 or 2+0 with even odds. 1+1 is "a op b", op any of + - * /, with
// "a / d" for d a divisor of |a| (1..9 when a is 0). 2+0 is, with even
// odds, "a op b" (op not /) or a parenthesised two-term expression drawn
// the same way, "( … )" or "-( … )" with even odds, so parentheses nest
// with probability 1/4 a level. Terms are uniform in -9..9.
func RandomRGProblem(rng *rand.Rand) RGProblem {
	expr, v := rgTwoTerms(rng)
	return RGProblem{Question: "Calculate " + expr + ".", Answer: strconv.Itoa(v)}
}

// rgTwoTerms is add_terms(2) of reasoning-gym's generator for one digit:
// the expression and its value (exact: a division always divides).
func rgTwoTerms(rng *rand.Rand) (string, int) {
	term := func() int { return rng.IntN(19) - 9 }
	if 1+rng.IntN(2) == 2 {
		if rng.Float64() > 0.5 {
			open, sign := "(", 1
			if rng.Float64() > 0.5 {
				open, sign = "-(", -1
			}
			e, v := rgTwoTerms(rng)
			return open + " " + e + " )", sign * v
		}
		a := term()
		op := []string{"+", "-", "*"}[rng.IntN(3)]
		b := term()
		return rgJoin(a, op, b), rgApply(a, op, b)
	}
	a := term()
	op := []string{"+", "-", "*", "/"}[rng.IntN(4)]
	if op != "/" {
		b := term()
		return rgJoin(a, op, b), rgApply(a, op, b)
	}
	d := 1 + rng.IntN(9)
	if a != 0 {
		ds := rgDivisors(a)
		d = ds[rng.IntN(len(ds))]
	}
	return rgJoin(a, op, d), a / d
}

func rgJoin(a int, op string, b int) string {
	return strconv.Itoa(a) + " " + op + " " + strconv.Itoa(b)
}

func rgApply(a int, op string, b int) int {
	switch op {
	case "+":
		return a + b
	case "-":
		return a - b
	}
	return a * b
}

// rgDivisors lists the positive divisors of |a| (a ≠ 0).
func rgDivisors(a int) []int {
	if a < 0 {
		a = -a
	}
	var ds []int
	for d := 1; d <= a; d++ {
		if a%d == 0 {
			ds = append(ds, d)
		}
	}
	return ds
}

// RGHeldOut reports whether a question belongs to tiny-rg's held-out
// split, which its pretraining never sees: it does iff the 32-bit FNV-1a
// hash of the question's text is divisible by 10 (HeldOut's rule, on the
// whole question).
func RGHeldOut(question string) bool { return heldOutText(question) }

// RGTrainingProblem draws RandomRGProblem's questions outside the
// held-out split and short enough for context positions (BOS, the
// question, the answer and EOS).
func RGTrainingProblem(rng *rand.Rand, context int) RGProblem {
	for {
		p := RandomRGProblem(rng)
		if !RGHeldOut(p.Question) && len(p.Question)+len(p.Answer)+2 <= context {
			return p
		}
	}
}

// rgMinContext is the context every question without parentheses fits
// in: "Calculate -9 * 9." and "-81" with BOS and EOS.
const rgMinContext = 22

// RGHeldOutProblems returns the first n distinct held-out questions drawn
// by RandomRGProblem from a PCG seeded (2024, 2) that fit tiny-rg's
// context: a fixed evaluation set (of the family's about 22,000
// questions, about 2,200 are held out; n must stay well below that).
func RGHeldOutProblems(n int) []RGProblem {
	rng := rand.New(rand.NewPCG(2024, 2))
	ctx := RGConfig().Context
	return firstDistinct(n, func() RGProblem { return RandomRGProblem(rng) },
		func(p RGProblem) bool { return RGHeldOut(p.Question) && len(p.Question)+len(p.Answer)+2 <= ctx })
}

// RGExample returns the problem as a training example: the question as
// the prompt, the answer and EOS as the completion.
func (m *Model) RGExample(p RGProblem) (Example, error) {
	prompt, err := m.Tokenize(p.Question)
	if err != nil {
		return Example{}, fmt.Errorf("question %q: %w", p.Question, err)
	}
	ans, err := m.Tokenize(p.Answer)
	if err != nil {
		return Example{}, fmt.Errorf("answer %q: %w", p.Answer, err)
	}
	return Example{Prompt: prompt, Completion: append(ans, EOS)}, nil
}

// RGGreedyAccuracy returns the fraction of problems whose greedy
// completion is exactly the answer.
func (m *Model) RGGreedyAccuracy(ctx context.Context, a *Adapter, problems []RGProblem) (float64, error) {
	prompts, answers := make([]string, len(problems)), make([]string, len(problems))
	for i, p := range problems {
		prompts[i], answers[i] = p.Question, p.Answer
	}
	return m.greedyAccuracy(ctx, a, prompts, answers, 4)
}

// RGExpectedPass1 returns the exact expected pass@1 at temperature 1 over
// the problems: the mean probability of the answer and EOS.
func (m *Model) RGExpectedPass1(ctx context.Context, a *Adapter, problems []RGProblem) (float64, error) {
	batch := make([]Example, len(problems))
	for i, p := range problems {
		e, err := m.RGExample(p)
		if err != nil {
			return 0, fmt.Errorf("problem %d: %w", i, err)
		}
		batch[i] = e
	}
	ps, err := m.completionProbabilities(ctx, a, batch)
	if err != nil {
		return 0, err
	}
	return mean(ps), nil
}
