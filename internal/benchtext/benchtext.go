// Package benchtext makes the deterministic synthetic text that the
// benchmarks fill their tables with (artifacts/tables, rewards): words of
// a small seeded vocabulary with a number among them now and then, so
// that sizes, compression and string handling are those of model output
// without a model. The same seed gives the same text on every machine.
package benchtext

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

// Words is a vocabulary and the buffer text is written from it with. It
// is not safe for concurrent use.
type Words struct {
	vocab []string
	sb    strings.Builder
}

// New draws a vocabulary of 512 words, each of 2 to 9 lower-case letters,
// from r.
func New(r *rand.Rand) *Words {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	w := &Words{}
	for i := 0; i < 512; i++ {
		b := make([]byte, 2+r.IntN(8))
		for j := range b {
			b[j] = letters[r.IntN(len(letters))]
		}
		w.vocab = append(w.vocab, string(b))
	}
	return w
}

// Text is at least n bytes of words separated by spaces, drawn from r:
// one in sixteen a number below 10000, the others from the vocabulary.
func (w *Words) Text(r *rand.Rand, n int) string {
	w.sb.Reset()
	for w.sb.Len() < n {
		if w.sb.Len() > 0 {
			w.sb.WriteByte(' ')
		}
		if r.IntN(16) == 0 {
			w.sb.WriteString(strconv.Itoa(r.IntN(10000)))
		} else {
			w.sb.WriteString(w.vocab[r.IntN(len(w.vocab))])
		}
	}
	return w.sb.String()
}

// Vocab is the vocabulary size Tokens draws token ids from: Qwen2.5's.
const Vocab = 151936

// Tokens fills ids and logprobs (of equal length) with a completion's
// token ids and their log probabilities as a sampling policy returns
// them, drawn from r: ids uniform below Vocab, log probabilities
// exponential with mean 0.5 below zero (most tokens near certain, a few
// unlikely ones). bench/prodsize/floor.py draws the same distributions
// with numpy.
func Tokens(r *rand.Rand, ids []int32, logprobs []float32) {
	for j := range ids {
		ids[j] = int32(r.IntN(Vocab))
		logprobs[j] = float32(-0.5 * r.ExpFloat64())
	}
}
