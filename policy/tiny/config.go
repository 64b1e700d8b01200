package tiny

import (
	"errors"
	"fmt"
	"strings"
)

// The special tokens, ahead of the vocabulary's characters. Training
// never shows the model PAD or BOS as a target, so it learns to give them
// next to no probability; they stay in its distributions, as in every
// Hugging Face model, so that log-probabilities agree with transformers
// and vLLM.
const (
	PAD int32 = 0 // padding, for callers that need a rectangular batch
	BOS int32 = 1 // begins every sequence
	EOS int32 = 2 // ends a completion
)

const numSpecial = 3

// ErrVocabulary is wrapped by errors about text the vocabulary cannot
// encode or token ids it does not have.
var ErrVocabulary = errors.New("not in the vocabulary")

// Config sizes the model. It is stored in the weights file's metadata, so a
// file is all Load needs.
type Config struct {
	// Name is the model's name in policy versions ("tiny-arith").
	Name string `json:"name"`
	// Vocab lists the characters of the vocabulary, token ids 3, 4, …
	// after PAD, BOS and EOS. They must be distinct printable ASCII, the
	// space included, or the newline (tiny-tool's transcripts have lines).
	Vocab string `json:"vocab"`
	// Dim is the width of the residual stream (hidden_size), Heads the
	// number of attention heads and HeadDim the width of each (even:
	// rotary embeddings turn pairs; 0 means Dim/Heads), Layers the number
	// of blocks, Hidden the width of the SwiGLU MLP (intermediate_size)
	// and Context the largest number of positions, BOS included
	// (max_position_embeddings).
	Dim     int `json:"dim"`
	Heads   int `json:"heads"`
	HeadDim int `json:"head_dim,omitempty"`
	Layers  int `json:"layers"`
	Hidden  int `json:"hidden"`
	Context int `json:"context"`
}

// DefaultConfig is the shipped tiny-arith's configuration: 16 tokens,
// d 64, 4 heads of 32 (a head size vLLM's CPU attention accepts), 3
// layers, MLP 176, context 32. (tiny-chain has 2 layers: see
// DefaultChainPretrainConfig.)
func DefaultConfig() Config {
	return Config{Name: "tiny-arith", Vocab: "0123456789+-=", Dim: 64, Heads: 4, HeadDim: 32, Layers: 3, Hidden: 176, Context: 32}
}

// headDim returns the width of one attention head.
func (c Config) headDim() int {
	if c.HeadDim > 0 {
		return c.HeadDim
	}
	return c.Dim / c.Heads
}

// attnWidth returns the width of the queries, keys and values of all
// heads together.
func (c Config) attnWidth() int { return c.Heads * c.headDim() }

// VocabSize returns the number of token ids, special tokens included.
func (c Config) VocabSize() int { return numSpecial + len(c.Vocab) }

// Validate reports the first problem with the configuration.
func (c Config) Validate() error {
	switch {
	case c.Name == "" || strings.ContainsAny(c.Name, "@+ "):
		return fmt.Errorf("tiny config: name %q must be non-empty, without '@', '+' or spaces", c.Name)
	case c.Vocab == "":
		return fmt.Errorf("tiny config: the vocabulary is empty")
	case c.Dim <= 0 || c.Heads <= 0 || c.HeadDim < 0 || c.HeadDim%2 != 0:
		return fmt.Errorf("tiny config: dim %d, heads %d and head_dim %d must be positive, head_dim even", c.Dim, c.Heads, c.HeadDim)
	case c.HeadDim == 0 && (c.Dim%c.Heads != 0 || c.Dim/c.Heads%2 != 0):
		return fmt.Errorf("tiny config: dim %d must be a multiple of heads %d with an even quotient, or head_dim set", c.Dim, c.Heads)
	case c.Layers <= 0 || c.Hidden <= 0:
		return fmt.Errorf("tiny config: layers %d and hidden %d must be positive", c.Layers, c.Hidden)
	case c.Context < 2:
		return fmt.Errorf("tiny config: context %d must be at least 2", c.Context)
	}
	for i := 0; i < len(c.Vocab); i++ {
		ch := c.Vocab[i]
		if (ch < 0x20 || ch > 0x7e) && ch != '\n' {
			return fmt.Errorf("tiny config: vocabulary character %q at %d is not printable ASCII", ch, i)
		}
		if strings.IndexByte(c.Vocab[:i], ch) >= 0 {
			return fmt.Errorf("tiny config: vocabulary character %q appears twice", ch)
		}
	}
	return nil
}

// tokenizer maps characters to ids and back.
type tokenizer struct {
	vocab string
	ids   [128]int8 // -1: not in the vocabulary
}

func newTokenizer(vocab string) *tokenizer {
	t := &tokenizer{vocab: vocab}
	for i := range t.ids {
		t.ids[i] = -1
	}
	for i := 0; i < len(vocab); i++ {
		t.ids[vocab[i]] = int8(numSpecial + i)
	}
	return t
}

// encode appends the ids of s to dst; the error names the first character
// outside the vocabulary and its column (1-based, in characters).
func (t *tokenizer) encode(dst []int32, s string) ([]int32, error) {
	col := 0
	for _, r := range s {
		col++
		if r >= 128 || t.ids[r] < 0 {
			return dst, fmt.Errorf("character %q at column %d: %w %q", r, col, ErrVocabulary, t.vocab)
		}
		dst = append(dst, int32(t.ids[r]))
	}
	return dst, nil
}

// decode renders ids as text; special tokens render as nothing.
func (t *tokenizer) decode(ids []int32) (string, error) {
	b := make([]byte, 0, len(ids))
	for i, id := range ids {
		switch {
		case id >= numSpecial && int(id) < numSpecial+len(t.vocab):
			b = append(b, t.vocab[id-numSpecial])
		case id >= 0 && id < numSpecial:
		default:
			return "", fmt.Errorf("token %d at position %d: %w (ids 0..%d)", id, i+1, ErrVocabulary, numSpecial+len(t.vocab)-1)
		}
	}
	return string(b), nil
}
