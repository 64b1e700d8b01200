package hftokenizer

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
)

// FileName is the file a Hugging Face model directory keeps its tokenizer in.
const FileName = "tokenizer.json"

// Errors Load returns, for errors.Is.
var (
	// ErrNotFound is a path that names neither a tokenizer.json nor a
	// directory holding one.
	ErrNotFound = errors.New("tokenizer not found")
	// ErrInvalid is a file that is not a tokenizer.json this package reads.
	ErrInvalid = errors.New("not a tokenizer.json")
)

// Tokenizer spells the ids of one vocabulary.
type Tokenizer struct {
	text []string // by id: the token's text; "" where the id has no token
	has  []bool   // by id: whether the id has a token
}

type file struct {
	AddedTokens []struct {
		ID      int32  `json:"id"`
		Content string `json:"content"`
	} `json:"added_tokens"`
	Model *struct {
		Type  string          `json:"type"`
		Vocab json.RawMessage `json:"vocab"`
	} `json:"model"`
	Decoder *decoder `json:"decoder"`
}

type decoder struct {
	Type        string     `json:"type"`
	Replacement string     `json:"replacement"`
	Decoders    []*decoder `json:"decoders"`
	Pattern     struct {
		String string `json:"String"`
	} `json:"pattern"`
	Content string `json:"content"`
}

// Load reads path: a tokenizer.json, or a model directory holding one.
func Load(path string) (*Tokenizer, error) {
	name := path
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		name = filepath.Join(path, FileName)
	}
	b, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		if name != path {
			return nil, fmt.Errorf("read tokenizer %s: the directory holds no %s: %w", path, FileName, ErrNotFound)
		}
		return nil, fmt.Errorf("read tokenizer %s: no such file or directory: %w", path, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read tokenizer %s: %w", path, err)
	}
	t, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("read tokenizer %s: %w", name, err)
	}
	return t, nil
}

// Parse reads the bytes of a tokenizer.json.
func Parse(b []byte) (*Tokenizer, error) {
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if f.Model == nil || len(f.Model.Vocab) == 0 {
		return nil, fmt.Errorf("%w: it has no model.vocab (save the tokenizer with tokenizers' Tokenizer.save or transformers' save_pretrained)", ErrInvalid)
	}
	vocab := map[int32]string{}
	var m map[string]int32
	var pairs [][2]any
	switch {
	case json.Unmarshal(f.Model.Vocab, &m) == nil:
		for tok, id := range m {
			vocab[id] = tok
		}
	case json.Unmarshal(f.Model.Vocab, &pairs) == nil:
		for id, p := range pairs {
			s, ok := p[0].(string)
			if !ok {
				return nil, fmt.Errorf("%w: model.vocab[%d] is not a [piece, score] pair", ErrInvalid, id)
			}
			vocab[int32(id)] = s
		}
	default:
		return nil, fmt.Errorf("%w: model.vocab is neither a map of tokens to ids nor a list of [piece, score] pairs", ErrInvalid)
	}
	dec := decoders(f.Decoder)
	n := int32(0)
	for id := range vocab {
		n = max(n, id+1)
	}
	for _, a := range f.AddedTokens {
		n = max(n, a.ID+1)
	}
	for id := range vocab {
		if id < 0 {
			return nil, fmt.Errorf("%w: model.vocab gives %q the negative id %d", ErrInvalid, vocab[id], id)
		}
	}
	t := &Tokenizer{text: make([]string, n), has: make([]bool, n)}
	for id, tok := range vocab {
		t.text[id], t.has[id] = spell(tok, dec), true
	}
	for _, a := range f.AddedTokens {
		if a.ID < 0 {
			return nil, fmt.Errorf("%w: added_tokens gives %q the negative id %d", ErrInvalid, a.Content, a.ID)
		}
		// Added tokens are spelled as written: decode leaves them alone.
		t.text[a.ID], t.has[a.ID] = a.Content, true
	}
	return t, nil
}

// VocabSize is one past the largest id.
func (t *Tokenizer) VocabSize() int { return len(t.text) }

// TokenText is id's text; "<id N>" for an id the vocabulary lacks.
func (t *Tokenizer) TokenText(id int32) string {
	if id < 0 || int(id) >= len(t.text) || !t.has[id] {
		return "<id " + strconv.Itoa(int(id)) + ">"
	}
	return t.text[id]
}

// decoders flattens a decoder (a Sequence's in order).
func decoders(d *decoder) []*decoder {
	if d == nil {
		return nil
	}
	if d.Type == "Sequence" {
		var out []*decoder
		for _, s := range d.Decoders {
			out = append(out, decoders(s)...)
		}
		return out
	}
	return []*decoder{d}
}

// spell turns one vocabulary entry into its text through the decoders.
// Strip, Fuse and a Metaspace's start-of-text rule concern a text's first
// token or several tokens, not one token in mid-sequence: they are left out.
func spell(tok string, dec []*decoder) string {
	var raw []byte // bytes a ByteLevel or ByteFallback step produced
	s := tok
	for _, d := range dec {
		switch d.Type {
		case "ByteLevel":
			if b, ok := byteLevel(s); ok {
				raw = b
				s = string(b)
			}
		case "ByteFallback":
			if b, ok := byteToken(s); ok {
				raw = []byte{b}
				s = string(raw)
			}
		case "Metaspace":
			s = strings.ReplaceAll(s, cmp.Or(d.Replacement, "▁"), " ")
		case "Replace":
			if d.Pattern.String != "" {
				s = strings.ReplaceAll(s, d.Pattern.String, d.Content)
			}
		case "WordPiece":
			if rest, ok := strings.CutPrefix(s, "##"); ok {
				s = rest
			} else {
				s = " " + s
			}
		}
	}
	if raw != nil && !utf8.ValidString(s) {
		return escape(s)
	}
	return s
}

// escape writes s's valid characters as they are and each byte of an
// invalid sequence as \xNN.
func escape(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			fmt.Fprintf(&sb, `\x%02x`, s[i])
			i++
			continue
		}
		sb.WriteString(s[i : i+n])
		i += n
	}
	return sb.String()
}

// byteToken reads a ByteFallback token, "<0xNN>".
func byteToken(s string) (byte, bool) {
	if len(s) != 6 || !strings.HasPrefix(s, "<0x") || s[5] != '>' {
		return 0, false
	}
	v, err := strconv.ParseUint(s[3:5], 16, 8)
	return byte(v), err == nil
}

// unicodeToByte inverts GPT-2's bytes_to_unicode: printable Latin-1 bytes
// stand for themselves, the other 68 bytes for U+0100 onwards in order.
var unicodeToByte = func() map[rune]byte {
	m := make(map[rune]byte, 256)
	next := rune(256)
	for b := 0; b < 256; b++ {
		if ('!' <= b && b <= '~') || (0xA1 <= b && b <= 0xAC) || (0xAE <= b && b <= 0xFF) {
			m[rune(b)] = byte(b)
		} else {
			m[next] = byte(b)
			next++
		}
	}
	return m
}()

// byteLevel maps a ByteLevel token's characters back to its bytes; false
// when a character is outside the table (an added token spelled plainly).
func byteLevel(s string) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		b, ok := unicodeToByte[r]
		if !ok {
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
}
