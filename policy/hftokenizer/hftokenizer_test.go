package hftokenizer_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/policy/hftokenizer"
)

// TestParity trains a real tokenizer of each kind with the tokenizers
// package, saves its tokenizer.json and compares every id's text with
// tokenizers' decode([id]). Two differences are by design: a Metaspace
// token keeps the leading space decode drops at the start of a text, and
// a part of a multi-byte character shows its bytes escaped where decode
// gives U+FFFD.
func TestParity(t *testing.T) {
	py := pyvenv.Python(t, "check the tokenizer.json decoder against tokenizers")
	for _, kind := range []string{"bytelevel", "sentencepiece"} {
		t.Run(kind, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), hftokenizer.FileName)
			out := pyvenv.Run(t, "testdata/train.py", nil, py, filepath.Join("testdata", "train.py"), kind, path)
			var want []string
			if err := json.Unmarshal(out, &want); err != nil {
				t.Fatalf("decode train.py's output: %v", err)
			}
			tok, err := hftokenizer.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if tok.VocabSize() != len(want) {
				t.Fatalf("vocab size %d, tokenizers says %d", tok.VocabSize(), len(want))
			}
			escaped, spaced := 0, 0
			for id, w := range want {
				got := tok.TokenText(int32(id))
				switch {
				case got == w:
				case strings.Contains(got, `\x`) && strings.Contains(w, "\ufffd"):
					escaped++
				case kind == "sentencepiece" && strings.HasPrefix(got, " ") && got[1:] == w:
					spaced++
				default:
					t.Errorf("id %d: %q, tokenizers decodes %q", id, got, w)
				}
			}
			// The corpus holds multi-byte characters and words: both
			// exceptions must have been exercised, not skipped.
			if kind == "bytelevel" && escaped == 0 {
				t.Error("no byte-level token was part of a multi-byte character")
			}
			if kind == "sentencepiece" && spaced == 0 {
				t.Error("no sentencepiece token started a word")
			}
		})
	}
}

// TestTokenText spells hand-written vocabularies through each decoder.
func TestTokenText(t *testing.T) {
	for _, tc := range []struct {
		name string
		json string
		want []string // by id
	}{
		{"byte-level", `{"model":{"type":"BPE","vocab":{"Ġthe":0,"Ã¤":1,"Ã":2,"ĊĊ":3}},"decoder":{"type":"ByteLevel"},
			"added_tokens":[{"id":4,"content":"<|im_end|>","special":true}]}`,
			[]string{" the", "ä", `\xc3`, "\n\n", "<|im_end|>"}},
		{"llama 2 sequence with byte fallback", `{"model":{"type":"BPE","vocab":{"<unk>":0,"<0x0A>":1,"<0xE4>":2,"▁hello":3,"▁":4}},
			"decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]}}`,
			[]string{"<unk>", "\n", `\xe4`, " hello", " "}},
		{"unigram metaspace", `{"model":{"type":"Unigram","vocab":[["<pad>",0.0],["▁world",-3.5],["s",-2.0]]},"decoder":{"type":"Metaspace","replacement":"▁"}}`,
			[]string{"<pad>", " world", "s"}},
		{"wordpiece", `{"model":{"type":"WordPiece","vocab":{"[CLS]":0,"play":1,"##ing":2}},"decoder":{"type":"WordPiece"},
			"added_tokens":[{"id":0,"content":"[CLS]"}]}`,
			[]string{"[CLS]", " play", "ing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := hftokenizer.Parse([]byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			for id, w := range tc.want {
				if got := tok.TokenText(int32(id)); got != w {
					t.Errorf("id %d: %q, want %q", id, got, w)
				}
			}
		})
	}
}

// An id outside the vocabulary (or a gap in it) is shown as the id.
func TestTokenTextUnknownID(t *testing.T) {
	tok, err := hftokenizer.Parse([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"c":2}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int32]string{1: "<id 1>", 3: "<id 3>", 151643: "<id 151643>", -1: "<id -1>"} {
		if got := tok.TokenText(id); got != want {
			t.Errorf("id %d: %q, want %q", id, got, want)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := filepath.Join(dir, "empty-model")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string
		is               error
	}{
		{"missing file", filepath.Join(dir, "nope.json"),
			"read tokenizer " + filepath.Join(dir, "nope.json") + ": no such file or directory: tokenizer not found", hftokenizer.ErrNotFound},
		{"directory without tokenizer.json", empty,
			"read tokenizer " + empty + ": the directory holds no tokenizer.json: tokenizer not found", hftokenizer.ErrNotFound},
		{"config.json, not a tokenizer", write("config.json", `{"architectures":["Qwen2ForCausalLM"],"vocab_size":151936}`),
			"read tokenizer " + filepath.Join(dir, "config.json") + ": not a tokenizer.json: it has no model.vocab (save the tokenizer with tokenizers' Tokenizer.save or transformers' save_pretrained)", hftokenizer.ErrInvalid},
		{"not JSON", write("vocab.txt", "hello\nworld\n"),
			"read tokenizer " + filepath.Join(dir, "vocab.txt") + ": not a tokenizer.json: invalid character 'h' looking for beginning of value", hftokenizer.ErrInvalid},
		{"vocab of another shape", write("odd.json", `{"model":{"vocab":"gpt2"}}`),
			"read tokenizer " + filepath.Join(dir, "odd.json") + ": not a tokenizer.json: model.vocab is neither a map of tokens to ids nor a list of [piece, score] pairs", hftokenizer.ErrInvalid},
		{"negative id", write("neg.json", `{"model":{"vocab":{"a":-2}}}`),
			"read tokenizer " + filepath.Join(dir, "neg.json") + `: not a tokenizer.json: model.vocab gives "a" the negative id -2`, hftokenizer.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := hftokenizer.Load(tc.path)
			if err == nil || err.Error() != tc.want || !errors.Is(err, tc.is) {
				t.Errorf("error %v\nwant   %s (%v)", err, tc.want, tc.is)
			}
		})
	}
}
