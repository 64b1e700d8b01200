package tiny

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/rlpipe/rlpipe/policy/safetensors"
)

//go:embed weights/base.safetensors
var embeddedWeights []byte

//go:embed weights/chain.safetensors
var embeddedChainWeights []byte

//go:embed weights/rg.safetensors
var embeddedRGWeights []byte

//go:embed weights/tool.safetensors
var embeddedToolWeights []byte

// Metadata keys of the weights file.
const (
	metaFormat = "format"
	metaConfig = "tiny.config"
	formatName = "rlpipe-tiny/2"
)

// Model is the tiny causal transformer: its configuration and base
// weights. Scoring and sampling are safe for concurrent use; training the
// base weights (a Trainer without an adapter) is not, with anything.
type Model struct {
	cfg Config
	lo  *layout
	w   *weights
	tok *tokenizer

	mu      sync.Mutex
	version string // "" until computed; reset when the weights change

	actsPool    sync.Pool // *acts for scoring
	samplerPool sync.Pool // *sampler
	shardPool   sync.Pool // *shard, from trainers' Release
}

// New returns a model with freshly initialised weights (GPT-2 style,
// seeded).
func New(cfg Config, seed uint64) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := newModel(cfg)
	m.lo.init(cfg, m.w.flat, seed)
	return m, nil
}

func newModel(cfg Config) *Model {
	lo := newLayout(cfg)
	return &Model{cfg: cfg, lo: lo, w: lo.view(cfg, make([]float32, lo.size)), tok: newTokenizer(cfg.Vocab)}
}

// Embedded returns the shipped base model (weights/base.safetensors), warm
// started on addition; see the package documentation for how it was made.
func Embedded() (*Model, error) { return unmarshalEmbedded(embeddedWeights, "tiny") }

// EmbeddedSHA256 returns the hex SHA-256 of the shipped weights file.
func EmbeddedSHA256() string { return hexSHA256(embeddedWeights) }

// EmbeddedChain returns the shipped base for multi-turn episodes
// (weights/chain.safetensors, ModelTinyChain): the same architecture,
// pretrained by DefaultChainPretrainConfig on single problems and two-turn
// running sums alike.
func EmbeddedChain() (*Model, error) { return unmarshalEmbedded(embeddedChainWeights, "tiny-chain") }

// EmbeddedChainSHA256 returns the hex SHA-256 of the shipped tiny-chain
// weights file.
func EmbeddedChainSHA256() string { return hexSHA256(embeddedChainWeights) }

// EmbeddedRG returns the shipped base for reasoning-gym's basic_arithmetic
// questions (weights/rg.safetensors, ModelTinyRG): the same architecture
// with RGConfig's vocabulary, pretrained by DefaultRGPretrainConfig.
func EmbeddedRG() (*Model, error) { return unmarshalEmbedded(embeddedRGWeights, ModelTinyRG) }

// EmbeddedRGSHA256 returns the hex SHA-256 of the shipped tiny-rg weights
// file.
func EmbeddedRGSHA256() string { return hexSHA256(embeddedRGWeights) }

// EmbeddedTool returns the shipped base for the tool task
// (weights/tool.safetensors, ModelTinyTool): ToolConfig's model,
// pretrained by DefaultToolPretrainConfig on solved Hermes tool-call
// episodes.
func EmbeddedTool() (*Model, error) { return unmarshalEmbedded(embeddedToolWeights, ModelTinyTool) }

// EmbeddedToolSHA256 returns the hex SHA-256 of the shipped tiny-tool
// weights file.
func EmbeddedToolSHA256() string { return hexSHA256(embeddedToolWeights) }

// unmarshalEmbedded decodes shipped weights; name (tiny, tiny-chain, tiny-rg, tiny-tool) is
// what an error calls them.
func unmarshalEmbedded(b []byte, name string) (*Model, error) {
	m, err := Unmarshal(b)
	if err != nil {
		return nil, fmt.Errorf("embedded %s weights: %w", name, err)
	}
	return m, nil
}

// hexSHA256 is the hex SHA-256 of b.
func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Load reads a weights file written by Save.
func Load(path string) (*Model, error) {
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load tiny model: %w", err)
	}
	m, err := fromFile(f)
	if err != nil {
		return nil, fmt.Errorf("load tiny model %s: %w", path, err)
	}
	return m, nil
}

// Unmarshal decodes a weights file's bytes.
func Unmarshal(b []byte) (*Model, error) {
	f, err := safetensors.Unmarshal(b)
	if err != nil {
		return nil, err
	}
	return fromFile(f)
}

func fromFile(f *safetensors.File) (*Model, error) {
	if got := f.Metadata[metaFormat]; got != formatName {
		hint := ""
		if got == "rlpipe-tiny/1" {
			hint = " (a GPT-style model of an older rlpipe: the embedded model is a Llama now; pretrain it again with `rlpipe policy pretrain`)"
		}
		return nil, fmt.Errorf("metadata %s is %q, want %q%s", metaFormat, got, formatName, hint)
	}
	var cfg Config
	if err := json.Unmarshal([]byte(f.Metadata[metaConfig]), &cfg); err != nil {
		return nil, fmt.Errorf("metadata %s: %w", metaConfig, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := newModel(cfg)
	if err := m.readTensors(f); err != nil {
		return nil, err
	}
	return m, nil
}

// readTensors fills the weights from f's tensors, which must be exactly
// the model's.
func (m *Model) readTensors(f *safetensors.File) error {
	for i := range m.lo.params {
		p := &m.lo.params[i]
		t, ok := f.Tensors[p.name]
		if !ok {
			return fmt.Errorf("tensor %q is missing", p.name)
		}
		if !slices.Equal(t.Shape, p.shape) {
			return fmt.Errorf("tensor %q has shape %v, the config needs %v", p.name, t.Shape, p.shape)
		}
		v, err := t.Float32()
		if err != nil {
			return fmt.Errorf("tensor %q: %w", p.name, err)
		}
		p.fromFile(v, m.w.flat[p.off:p.off+p.size])
	}
	if len(f.Tensors) != len(m.lo.params) {
		for _, n := range f.Names() {
			if m.lo.param(n) < 0 {
				return fmt.Errorf("tensor %q is not part of the model", n)
			}
		}
	}
	return nil
}

func (lo *layout) param(name string) int {
	for i := range lo.params {
		if lo.params[i].name == name {
			return i
		}
	}
	return -1
}

// Marshal encodes the model as a safetensors file: PyTorch-style tensor
// names and shapes, the Config as JSON in the metadata. Equal weights give
// equal bytes.
func (m *Model) Marshal() ([]byte, error) {
	f, err := m.file()
	if err != nil {
		return nil, err
	}
	return safetensors.Marshal(f)
}

func (m *Model) file() (*safetensors.File, error) {
	cfg, err := json.Marshal(m.cfg)
	if err != nil {
		return nil, fmt.Errorf("encode the model config: %w", err)
	}
	f := safetensors.NewFile(map[string]string{metaFormat: formatName, metaConfig: string(cfg)})
	for i := range m.lo.params {
		p := &m.lo.params[i]
		f.Tensors[p.name] = safetensors.FromFloat32(p.shape, p.toFile(m.w.flat[p.off:p.off+p.size]))
	}
	return f, nil
}

// Save writes the model to path atomically.
func (m *Model) Save(path string) error {
	f, err := m.file()
	if err != nil {
		return err
	}
	return safetensors.WriteFile(path, f)
}

// Clone returns a copy of the model with its own weights: what full
// training changes in place while m stays the reference.
func (m *Model) Clone() *Model {
	c := newModel(m.cfg)
	copy(c.w.flat, m.w.flat)
	return c
}

// Config returns the model's configuration.
func (m *Model) Config() Config { return m.cfg }

// NumParams returns the number of base parameters.
func (m *Model) NumParams() int { return m.lo.size }

// Version returns "<name>@<first 12 hex digits of the SHA-256 of the
// weights file>", e.g. "tiny-arith@3f2a…"; samples carry it, with
// "+<adapter>" appended when an adapter was used.
func (m *Model) Version() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.version == "" {
		b, err := m.Marshal()
		if err != nil {
			panic(err) // the model's own tensors always encode
		}
		s := sha256.Sum256(b)
		m.version = m.cfg.Name + "@" + hex.EncodeToString(s[:])[:12]
	}
	return m.version
}

func (m *Model) weightsChanged() {
	m.mu.Lock()
	m.version = ""
	m.mu.Unlock()
}

// Tokenize returns the token ids of s (no BOS, no EOS). The error names the
// first character outside the vocabulary and its column, and wraps
// ErrVocabulary.
func (m *Model) Tokenize(s string) ([]int32, error) {
	return m.tok.encode(nil, s)
}

// TokenText returns the character token id stands for; "<pad>", "<bos>"
// and "<eos>" for the special tokens, which Decode renders as nothing;
// "" for an id outside the vocabulary.
func (m *Model) TokenText(id int32) string {
	switch {
	case id == PAD:
		return "<pad>"
	case id == BOS:
		return "<bos>"
	case id == EOS:
		return "<eos>"
	case id >= numSpecial && int(id) < m.cfg.VocabSize():
		return m.cfg.Vocab[id-numSpecial : id-numSpecial+1]
	}
	return ""
}

// Decode renders token ids as text; PAD, BOS and EOS render as nothing. An
// id outside the vocabulary is an error wrapping ErrVocabulary.
func (m *Model) Decode(ids []int32) (string, error) {
	return m.tok.decode(ids)
}
