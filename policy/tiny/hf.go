package tiny

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/rlpipe/rlpipe/policy/safetensors"
)

// The files of a Hugging Face model directory.
const (
	HFConfigFile          = "config.json"
	HFGenerationFile      = "generation_config.json"
	HFWeightsFile         = "model.safetensors"
	HFTokenizerFile       = "tokenizer.json"
	HFTokenizerConfigFile = "tokenizer_config.json"
)

// hfConfig is config.json of a LlamaForCausalLM, in the fields
// transformers and vLLM read. Both rope_theta (transformers 4) and
// rope_parameters (transformers 5) are written.
type hfConfig struct {
	Architectures         []string         `json:"architectures"`
	AttentionBias         bool             `json:"attention_bias"`
	AttentionDropout      float64          `json:"attention_dropout"`
	BOSTokenID            int              `json:"bos_token_id"`
	EOSTokenID            int              `json:"eos_token_id"`
	PadTokenID            int              `json:"pad_token_id"`
	HeadDim               int              `json:"head_dim"`
	HiddenAct             string           `json:"hidden_act"`
	HiddenSize            int              `json:"hidden_size"`
	InitializerRange      float64          `json:"initializer_range"`
	IntermediateSize      int              `json:"intermediate_size"`
	MaxPositionEmbeddings int              `json:"max_position_embeddings"`
	MLPBias               bool             `json:"mlp_bias"`
	ModelType             string           `json:"model_type"`
	NumAttentionHeads     int              `json:"num_attention_heads"`
	NumHiddenLayers       int              `json:"num_hidden_layers"`
	NumKeyValueHeads      int              `json:"num_key_value_heads"`
	RMSNormEps            float64          `json:"rms_norm_eps"`
	RopeTheta             float64          `json:"rope_theta"`
	RopeParameters        *hfRope          `json:"rope_parameters"`
	RopeScaling           *json.RawMessage `json:"rope_scaling,omitempty"`
	TieWordEmbeddings     bool             `json:"tie_word_embeddings"`
	DType                 string           `json:"dtype"`
	TorchDType            string           `json:"torch_dtype"`
	UseCache              bool             `json:"use_cache"`
	VocabSize             int              `json:"vocab_size"`
	// RlpipeName is the model's name in policy versions.
	RlpipeName string `json:"rlpipe_name,omitempty"`
}

type hfRope struct {
	RopeTheta float64 `json:"rope_theta"`
	RopeType  string  `json:"rope_type"`
}

func (m *Model) hfConfig() hfConfig {
	c := m.cfg
	return hfConfig{
		Architectures: []string{"LlamaForCausalLM"},
		BOSTokenID:    int(BOS), EOSTokenID: int(EOS), PadTokenID: int(PAD),
		HeadDim: c.headDim(), HiddenAct: "silu", HiddenSize: c.Dim,
		InitializerRange: 0.02, IntermediateSize: c.Hidden,
		MaxPositionEmbeddings: c.Context, ModelType: "llama",
		NumAttentionHeads: c.Heads, NumHiddenLayers: c.Layers, NumKeyValueHeads: c.Heads,
		RMSNormEps: normEps, RopeTheta: ropeTheta,
		RopeParameters: &hfRope{RopeTheta: ropeTheta, RopeType: "default"},
		DType:          "float32", TorchDType: "float32", UseCache: true,
		VocabSize: c.VocabSize(), RlpipeName: c.Name,
	}
}

// Token names of the special tokens in tokenizer.json.
var specialNames = [numSpecial]string{"<pad>", "<bos>", "<eos>"}

// chatTemplate renders a conversation as the embedded policy does: BOS,
// then the messages' contents, each assistant message followed by EOS.
const chatTemplate = "{{ bos_token }}{% for message in messages %}{{ message['content'] }}" +
	"{% if message['role'] == 'assistant' %}{{ eos_token }}{% endif %}{% endfor %}"

// ExportHF writes the model as a Hugging Face model directory that
// transformers (AutoModelForCausalLM, AutoTokenizer) and vLLM load as it
// is: config.json (LlamaForCausalLM), model.safetensors (the same
// tensors, float32), generation_config.json, and a WordLevel tokenizer
// with one token per character whose post-processor prepends BOS and whose
// chat template renders conversations as the embedded policy does. dir is
// created if needed; existing files of those names are replaced. Equal
// models give equal bytes.
func (m *Model) ExportHF(dir string) error { return m.ExportHFSharded(dir, 0) }

// ExportHFSharded is ExportHF with the weights split into shards of at
// most maxShardSize bytes (0: safetensors.DefaultMaxShardSize) and
// model.safetensors.index.json when they do not fit in one
// (safetensors.WriteModel); weights files of an earlier export the new
// one does not use are removed.
func (m *Model) ExportHFSharded(dir string, maxShardSize int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("export %s: %w", m.cfg.Name, err)
	}
	f, err := m.file()
	if err != nil {
		return err
	}
	f.Metadata = map[string]string{"format": "pt"} // transformers refuses other formats
	files := []struct {
		name string
		v    any
	}{
		{HFConfigFile, m.hfConfig()},
		{HFGenerationFile, map[string]any{"bos_token_id": BOS, "eos_token_id": EOS, "pad_token_id": PAD}},
		{HFTokenizerFile, m.hfTokenizer()},
		{HFTokenizerConfigFile, m.hfTokenizerConfig()},
	}
	for _, fl := range files {
		b, err := json.MarshalIndent(fl.v, "", "  ")
		if err != nil {
			return fmt.Errorf("export %s: encode %s: %w", m.cfg.Name, fl.name, err)
		}
		if err := writeFileAtomic(filepath.Join(dir, fl.name), append(b, '\n')); err != nil {
			return fmt.Errorf("export %s: %w", m.cfg.Name, err)
		}
	}
	if err := safetensors.WriteModel(dir, f, maxShardSize); err != nil {
		return fmt.Errorf("export %s: %w", m.cfg.Name, err)
	}
	return nil
}

func (m *Model) hfTokenizer() map[string]any {
	type tok struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	added := make([]tok, numSpecial)
	vocab := orderedVocab{}
	for i, n := range specialNames {
		added[i] = tok{ID: i, Content: n, Special: true}
		vocab = append(vocab, vocabEntry{n, i})
	}
	for i := 0; i < len(m.cfg.Vocab); i++ {
		vocab = append(vocab, vocabEntry{m.cfg.Vocab[i : i+1], numSpecial + i})
	}
	seq := func(id string, typ int) map[string]any {
		return map[string]any{"Sequence": map[string]any{"id": id, "type_id": typ}}
	}
	bos := map[string]any{"SpecialToken": map[string]any{"id": specialNames[BOS], "type_id": 0}}
	return map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": added,
		"normalizer":   nil,
		"pre_tokenizer": map[string]any{
			"type": "Split", "pattern": map[string]any{"Regex": `[\s\S]`}, "behavior": "Isolated", "invert": false,
		},
		"post_processor": map[string]any{
			"type":   "TemplateProcessing",
			"single": []any{bos, seq("A", 0)},
			"pair":   []any{bos, seq("A", 0), seq("B", 1)},
			"special_tokens": map[string]any{
				specialNames[BOS]: map[string]any{"id": specialNames[BOS], "ids": []int{int(BOS)}, "tokens": []string{specialNames[BOS]}},
			},
		},
		"decoder": map[string]any{"type": "Fuse"},
		// No unknown token: a character outside the vocabulary is an
		// error, as it is for Tokenize.
		"model": map[string]any{"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"},
	}
}

func (m *Model) hfTokenizerConfig() map[string]any {
	return map[string]any{
		"backend":                      "tokenizers",
		"tokenizer_class":              "PreTrainedTokenizerFast",
		"bos_token":                    specialNames[BOS],
		"eos_token":                    specialNames[EOS],
		"pad_token":                    specialNames[PAD],
		"model_max_length":             m.cfg.Context,
		"clean_up_tokenization_spaces": false,
		"chat_template":                chatTemplate,
	}
}

// vocabEntry and orderedVocab encode tokenizer.json's vocabulary in id
// order (a Go map would sort the keys).
type vocabEntry struct {
	tok string
	id  int
}

type orderedVocab []vocabEntry

func (v orderedVocab) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(e.tok)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		fmt.Fprintf(&b, ":%d", e.id)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ErrArchitecture is wrapped by LoadHF's errors about a model directory
// the embedded engine cannot run.
var ErrArchitecture = errors.New("not a model the embedded engine runs")

// IsHFDir reports whether dir holds a Hugging Face config.json.
func IsHFDir(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, HFConfigFile))
	return err == nil && st.Mode().IsRegular()
}

// LoadHF reads a Hugging Face model directory the embedded engine can
// run: a LlamaForCausalLM as ExportHF writes it (no biases, untied
// embeddings, SiLU, default rotary embeddings with θ 10000, RMSNorm ε
// 1e-5, as many key/value heads as heads) with a character tokenizer
// (<pad>, <bos>, <eos>, then one printable ASCII character per id). Any
// other value is an error wrapping ErrArchitecture that names the file
// and the field.
func LoadHF(dir string) (*Model, error) {
	cpath := filepath.Join(dir, HFConfigFile)
	b, err := os.ReadFile(cpath)
	if err != nil {
		return nil, fmt.Errorf("load model directory %s: %w", dir, err)
	}
	var hc hfConfig
	if err := json.Unmarshal(b, &hc); err != nil {
		return nil, fmt.Errorf("load %s: %w", cpath, err)
	}
	bad := func(field string, got any, want string) error {
		return fmt.Errorf("load %s: field %q is %v; the embedded engine runs %s: %w (export a model it runs with `rlpipe policy export`)", cpath, field, got, want, ErrArchitecture)
	}
	theta := hc.RopeTheta
	if hc.RopeParameters != nil {
		if hc.RopeParameters.RopeType != "" && hc.RopeParameters.RopeType != "default" {
			return nil, bad("rope_parameters.rope_type", hc.RopeParameters.RopeType, `"default" rotary embeddings`)
		}
		theta = hc.RopeParameters.RopeTheta
	}
	switch {
	case !slices.Equal(hc.Architectures, []string{"LlamaForCausalLM"}):
		return nil, bad("architectures", hc.Architectures, "[LlamaForCausalLM] only")
	case hc.HiddenAct != "silu":
		return nil, bad("hidden_act", fmt.Sprintf("%q", hc.HiddenAct), `"silu"`)
	case hc.AttentionBias:
		return nil, bad("attention_bias", true, "attention without biases")
	case hc.MLPBias:
		return nil, bad("mlp_bias", true, "an MLP without biases")
	case hc.TieWordEmbeddings:
		return nil, bad("tie_word_embeddings", true, "untied embeddings")
	case hc.NumKeyValueHeads != 0 && hc.NumKeyValueHeads != hc.NumAttentionHeads:
		return nil, bad("num_key_value_heads", hc.NumKeyValueHeads, fmt.Sprintf("as many key/value heads as heads (%d)", hc.NumAttentionHeads))
	case hc.RopeScaling != nil && string(*hc.RopeScaling) != "null":
		return nil, bad("rope_scaling", string(*hc.RopeScaling), "unscaled rotary embeddings (null)")
	case theta != ropeTheta:
		return nil, bad("rope_theta", theta, fmt.Sprint(ropeTheta))
	case math.Abs(hc.RMSNormEps-normEps) > 1e-12:
		return nil, bad("rms_norm_eps", hc.RMSNormEps, fmt.Sprint(normEps))
	case hc.BOSTokenID != int(BOS) || hc.EOSTokenID != int(EOS) || hc.PadTokenID != int(PAD):
		return nil, bad("bos_token_id", fmt.Sprintf("%d (eos %d, pad %d)", hc.BOSTokenID, hc.EOSTokenID, hc.PadTokenID), "bos 1, eos 2, pad 0")
	}
	vocab, err := readCharVocab(filepath.Join(dir, HFTokenizerFile))
	if err != nil {
		return nil, err
	}
	name := hc.RlpipeName
	if name == "" {
		name = filepath.Base(filepath.Clean(dir))
	}
	cfg := Config{Name: name, Vocab: vocab, Dim: hc.HiddenSize, Heads: hc.NumAttentionHeads, HeadDim: hc.HeadDim,
		Layers: hc.NumHiddenLayers, Hidden: hc.IntermediateSize, Context: hc.MaxPositionEmbeddings}
	if cfg.VocabSize() != hc.VocabSize {
		return nil, bad("vocab_size", hc.VocabSize, fmt.Sprintf("the %d tokens of %s", cfg.VocabSize(), HFTokenizerFile))
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("load %s: %w: %w", cpath, err, ErrArchitecture)
	}
	f, err := safetensors.ReadModel(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("load model directory %s: %w (it needs %s, or shards and %s)", dir, err, HFWeightsFile, safetensors.IndexFile)
		}
		return nil, fmt.Errorf("load model directory %s: %w", dir, err)
	}
	m := newModel(cfg)
	if err := m.readTensors(f); err != nil {
		return nil, fmt.Errorf("load the weights of %s: %w", dir, err)
	}
	return m, nil
}

// readCharVocab reads a WordLevel tokenizer.json's vocabulary: the
// special tokens at ids 0, 1, 2, then one character per id.
func readCharVocab(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("load tokenizer: %w", err)
	}
	var t struct {
		Model struct {
			Type  string         `json:"type"`
			Vocab map[string]int `json:"vocab"`
		} `json:"model"`
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return "", fmt.Errorf("load %s: %w", path, err)
	}
	if t.Model.Type != "WordLevel" {
		return "", fmt.Errorf("load %s: field \"model.type\" is %q; the embedded engine reads a WordLevel character vocabulary: %w", path, t.Model.Type, ErrArchitecture)
	}
	chars := make([]byte, len(t.Model.Vocab)-numSpecial)
	for tok, id := range t.Model.Vocab {
		switch {
		case id < numSpecial:
			if tok != specialNames[id] {
				return "", fmt.Errorf("load %s: token id %d is %q, want %q: %w", path, id, tok, specialNames[id], ErrArchitecture)
			}
		case id-numSpecial >= len(chars) || len(tok) != 1:
			return "", fmt.Errorf("load %s: token %q (id %d) is not one character with an id below %d: %w", path, tok, id, len(t.Model.Vocab), ErrArchitecture)
		default:
			chars[id-numSpecial] = tok[0]
		}
	}
	return string(chars), nil
}
