package arith

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// MaxOperand is the largest operand; operands range over 0…MaxOperand.
const MaxOperand = 999

// Split names, as written in the prompts table's split column.
const (
	SplitTrain   = "train"
	SplitHeldOut = "test"
)

// Source is the prompts table's source column for arith problems.
const Source = "arith"

// HeldOutSeed seeds the shuffle of the held-out set. It is part of the
// set's definition: changing it changes every evaluation.
const HeldOutSeed = 20240611

// Problem is one problem A+B.
type Problem struct{ A, B int }

// HeldOut reports whether problem (a, b) belongs to the held-out split:
// the FNV-1a 32-bit hash of the ASCII text "a+b" (decimal, without
// padding) is 0 modulo 10 (policy/tiny.HeldOut is the same rule; a test
// checks both agree on every problem). Every component that trains or evaluates on
// arith problems, the embedded model's pretraining included, uses this
// rule. Operands are meant to be in 0…MaxOperand; others hash the same way.
// In Python:
//
//	def held_out(a, b):
//	    h = 0x811c9dc5
//	    for c in f"{a}+{b}".encode():
//	        h = ((h ^ c) * 0x01000193) & 0xffffffff
//	    return h % 10 == 0
func HeldOut(a, b int) bool {
	var buf [48]byte
	s := strconv.AppendInt(buf[:0], int64(a), 10)
	s = append(s, '+')
	s = strconv.AppendInt(s, int64(b), 10)
	return fnv1a(s)%10 == 0
}

// fnv1a is the 32-bit FNV-1a hash.
func fnv1a(b []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range b {
		h ^= uint32(c)
		h *= 16777619
	}
	return h
}

// HeldOut reports whether p is a held-out problem.
func (p Problem) HeldOut() bool { return HeldOut(p.A, p.B) }

// Split returns SplitHeldOut or SplitTrain.
func (p Problem) Split() string {
	if p.HeldOut() {
		return SplitHeldOut
	}
	return SplitTrain
}

// ID returns the problem's stable id, "arith-123+456".
func (p Problem) ID() string { return "arith-" + p.text() }

// Prompt returns the prompt text, "123+456=".
func (p Problem) Prompt() string { return p.text() + "=" }

// Answer returns the sum in decimal, "579".
func (p Problem) Answer() string { return strconv.Itoa(p.A + p.B) }

func (p Problem) text() string { return strconv.Itoa(p.A) + "+" + strconv.Itoa(p.B) }

// Row returns p as a prompts-table row: its id, prompt, answer, split,
// Source, and the operands as metadata.
func (p Problem) Row() tables.Prompt {
	return tables.Prompt{
		PromptID: p.ID(),
		Prompt:   p.Prompt(),
		Answer:   p.Answer(),
		Metadata: fmt.Sprintf(`{"a":%d,"b":%d}`, p.A, p.B),
		Source:   Source,
		Split:    p.Split(),
	}
}

// Rows returns the rows of ps, in order.
func Rows(ps []Problem) []tables.Prompt {
	out := make([]tables.Prompt, len(ps))
	for i, p := range ps {
		out[i] = p.Row()
	}
	return out
}

// ParseID parses an id made by Problem.ID.
func ParseID(id string) (Problem, error) {
	rest, ok := strings.CutPrefix(id, "arith-")
	a, b, ok2 := strings.Cut(rest, "+")
	if !ok || !ok2 {
		return Problem{}, fmt.Errorf("arith id %q: want arith-A+B", id)
	}
	p, err := parseOperands(a, b)
	if err != nil {
		return Problem{}, fmt.Errorf("arith id %q: %v", id, err)
	}
	return p, nil
}

func parseOperands(a, b string) (Problem, error) {
	var p Problem
	for i, s := range []string{a, b} {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > MaxOperand || strconv.Itoa(n) != s {
			return Problem{}, fmt.Errorf("operand %q is not a number 0…%d without padding", s, MaxOperand)
		}
		if i == 0 {
			p.A = n
		} else {
			p.B = n
		}
	}
	return p, nil
}

// Sampler draws training problems from a seeded stream. Each draw takes
// a = bounded(1000) then b = bounded(1000) from a SplitMix64 generator
// seeded with the seed's two's-complement bits, and draws again while
// (a, b) is held out. bounded(n) takes the next 64-bit output x, rejects it
// while x < 2^64 mod n, and returns x mod n. A Sampler is not safe for
// concurrent use.
type Sampler struct{ rng splitMix }

// NewSampler returns a Sampler seeded with seed.
func NewSampler(seed int64) *Sampler { return &Sampler{rng: splitMix(uint64(seed))} }

// Next returns the next training problem. Problems repeat: draws are
// independent.
func (s *Sampler) Next() Problem {
	for {
		p := Problem{A: int(s.rng.bounded(MaxOperand + 1)), B: int(s.rng.bounded(MaxOperand + 1))}
		if !p.HeldOut() {
			return p
		}
	}
}

// Train returns the first n problems of NewSampler(seed).
func Train(seed int64, n int) []Problem {
	s := NewSampler(seed)
	out := make([]Problem, n)
	for i := range out {
		out[i] = s.Next()
	}
	return out
}

var heldOut = sync.OnceValue(func() []Problem {
	var ps []Problem
	for a := 0; a <= MaxOperand; a++ {
		for b := 0; b <= MaxOperand; b++ {
			if HeldOut(a, b) {
				ps = append(ps, Problem{a, b})
			}
		}
	}
	rng := splitMix(HeldOutSeed)
	for i := len(ps) - 1; i > 0; i-- {
		j := rng.bounded(uint64(i + 1))
		ps[i], ps[j] = ps[j], ps[i]
	}
	return ps
})

// NumHeldOut is the number of held-out problems.
func NumHeldOut() int { return len(heldOut()) }

// HeldOutSet returns the first n problems of the held-out set (all of them
// when n exceeds NumHeldOut): every held-out problem in (a, b) order, then
// shuffled by Fisher–Yates (i from the last index down to 1, swap i with
// bounded(i+1)) with a SplitMix64 generator seeded with HeldOutSeed.
func HeldOutSet(n int) []Problem {
	all := heldOut()
	n = max(0, min(n, len(all)))
	out := make([]Problem, n)
	copy(out, all)
	return out
}

// splitMix is the SplitMix64 generator.
type splitMix uint64

func (s *splitMix) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// bounded returns a uniform number in [0, n), n > 0.
func (s *splitMix) bounded(n uint64) uint64 {
	threshold := -n % n // 2^64 mod n
	for {
		if x := s.next(); x >= threshold {
			return x % n
		}
	}
}
