// Package arith is the verifiable arithmetic task "a+b=": operands 0 to
// 999, the prompt "123+456=" and the answer "579", in the embedded model's
// vocabulary (digits, '+' and '='; no spaces).
//
// # Splits
//
// The 1,000,000 problems are split once and for all by a rule that needs
// no list: problem (a, b) is held out iff the FNV-1a 64-bit hash of the
// ASCII text "a+b" (decimal, no padding, e.g. "123+456") is 0 modulo 10.
// HeldOut implements it; the embedded model's pretraining uses the same
// rule, so no held-out problem is ever trained on. About a tenth of the
// problems (100,005 exactly) are held out.
//
//	arith.HeldOut(123, 456) // false: a training problem
//
// # Sampling
//
// Training problems are drawn by a Sampler, a seeded stream that skips
// held-out problems:
//
//	s := arith.NewSampler(7)
//	p := s.Next() // the same problem for seed 7, every time
//	p.Prompt()    // "…+…="
//
// The held-out set is a fixed, ordered list: every held-out problem in
// (a, b) order, shuffled once with seed HeldOutSeed. HeldOutSet(n) is its
// first n problems, so a smaller evaluation set is a prefix of a larger one.
//
// Both use SplitMix64 and an unbiased Fisher–Yates shuffle written out
// here (see Sampler), not math/rand, so the sequences do not change with
// the Go version and can be reproduced in another language.
//
// # Rows
//
// Problem.ID is a stable id, "arith-123+456"; Rows turns problems into
// prompts-table rows ready for datasets.Put.
package arith
