package tiny

import (
	"fmt"
	"math/rand/v2"
)

// linear is one linear layer y = x·w (no bias, as in Llama). w is stored
// [in, out] so that the forward product needs no transpose (see
// kernels.go); files store it the PyTorch way, [out, in].
type linear struct {
	in, out int
	w       []float32
}

type block struct {
	attnNorm       []float32 // input_layernorm
	q, k, v, o     linear
	mlpNorm        []float32 // post_attention_layernorm
	gate, up, down linear
}

// weights views one flat parameter vector as the model's tensors.
type weights struct {
	cfg    Config
	flat   []float32
	tok    []float32 // [V, d]
	blocks []block
	norm   []float32
	head   linear     // [d, V]
	rope   *ropeTable // shared by every view of one layout
}

// paramKind says how a parameter is initialised and decayed.
type paramKind int

const (
	kindEmbed paramKind = iota
	kindGain
	kindMatrix
	kindResidual // a matrix writing into the residual stream: smaller init
)

// paramSpec is one tensor of the weights file.
type paramSpec struct {
	name       string
	shape      []int // as in the file
	off, size  int   // in the flat vector
	transposed bool  // stored [in, out], filed [out, in]
	kind       paramKind
}

// moduleSpec is one linear layer LoRA can adapt.
type moduleSpec struct {
	path    string // "model.layers.0.self_attn.q_proj"
	in, out int
	weight  int // index of its weight in the layout
}

// layout lists the parameters in file order (which is also the flat
// vector's order) and the adaptable modules.
type layout struct {
	params  []paramSpec
	modules []moduleSpec
	size    int
	rope    *ropeTable
}

// Module names, the suffixes LoRA target_modules refer to, in layout
// order.
var moduleNames = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// newLayout names the tensors exactly as Hugging Face's LlamaForCausalLM
// does, so a weights file is also a model.safetensors transformers loads.
func newLayout(c Config) *layout {
	lo := &layout{rope: newRopeTable(c.Context, c.headDim())}
	add := func(name string, kind paramKind, transposed bool, shape ...int) int {
		n := 1
		for _, s := range shape {
			n *= s
		}
		lo.params = append(lo.params, paramSpec{name: name, shape: shape, off: lo.size, size: n, transposed: transposed, kind: kind})
		lo.size += n
		return len(lo.params) - 1
	}
	lin := func(path string, in, out int, kind paramKind) {
		i := add(path+".weight", kind, true, out, in)
		lo.modules = append(lo.modules, moduleSpec{path: path, in: in, out: out, weight: i})
	}
	d, A, V := c.Dim, c.attnWidth(), c.VocabSize()
	add("model.embed_tokens.weight", kindEmbed, false, V, d)
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", kindGain, false, d)
		lin(p+"self_attn.q_proj", d, A, kindMatrix)
		lin(p+"self_attn.k_proj", d, A, kindMatrix)
		lin(p+"self_attn.v_proj", d, A, kindMatrix)
		lin(p+"self_attn.o_proj", A, d, kindResidual)
		add(p+"post_attention_layernorm.weight", kindGain, false, d)
		lin(p+"mlp.gate_proj", d, c.Hidden, kindMatrix)
		lin(p+"mlp.up_proj", d, c.Hidden, kindMatrix)
		lin(p+"mlp.down_proj", c.Hidden, d, kindResidual)
	}
	add("model.norm.weight", kindGain, false, d)
	add("lm_head.weight", kindMatrix, true, V, d)
	return lo
}

// view carves flat (of the layout's size) into tensors.
func (lo *layout) view(c Config, flat []float32) *weights {
	w := &weights{cfg: c, flat: flat, rope: lo.rope}
	i := 0
	next := func() []float32 {
		p := lo.params[i]
		i++
		return flat[p.off : p.off+p.size : p.off+p.size]
	}
	lin := func(in, out int) linear { return linear{in: in, out: out, w: next()} }
	d, A := c.Dim, c.attnWidth()
	w.tok = next()
	w.blocks = make([]block, c.Layers)
	for l := range w.blocks {
		b := &w.blocks[l]
		b.attnNorm = next()
		b.q, b.k, b.v, b.o = lin(d, A), lin(d, A), lin(d, A), lin(A, d)
		b.mlpNorm = next()
		b.gate, b.up, b.down = lin(d, c.Hidden), lin(d, c.Hidden), lin(c.Hidden, d)
	}
	w.norm = next()
	w.head = lin(d, c.VocabSize())
	return w
}

// linears returns the adaptable layers in layout order (that of
// layout.modules).
func (w *weights) linears() []*linear {
	var ls []*linear
	for l := range w.blocks {
		b := &w.blocks[l]
		ls = append(ls, &b.q, &b.k, &b.v, &b.o, &b.gate, &b.up, &b.down)
	}
	return ls
}

// init fills flat the GPT-2 way: normal(0, 0.02) matrices and
// embeddings, residual projections scaled by 1/√(2·layers), unit gains.
func (lo *layout) init(c Config, flat []float32, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x74696e79696e6974)) // "tinyinit"
	resid := 0.02 / sqrtf(2*float64(c.Layers))
	for _, p := range lo.params {
		v := flat[p.off : p.off+p.size]
		switch p.kind {
		case kindGain:
			for i := range v {
				v[i] = 1
			}
		case kindEmbed, kindMatrix:
			for i := range v {
				v[i] = float32(rng.NormFloat64() * 0.02)
			}
		case kindResidual:
			for i := range v {
				v[i] = float32(rng.NormFloat64() * resid)
			}
		}
	}
}

// toFile converts a parameter from its flat layout to the file's: the
// transpose of an [in, out] matrix.
func (p *paramSpec) toFile(src []float32) []float32 {
	if !p.transposed {
		return append([]float32(nil), src...)
	}
	return transpose(src, p.shape[1], p.shape[0])
}

// fromFile is toFile's inverse, writing into dst.
func (p *paramSpec) fromFile(src, dst []float32) {
	if !p.transposed {
		copy(dst, src)
		return
	}
	copy(dst, transpose(src, p.shape[0], p.shape[1]))
}

// transpose returns the [cols, rows] transpose of the row-major [rows, cols] m.
func transpose(m []float32, rows, cols int) []float32 {
	t := make([]float32, len(m))
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			t[c*rows+r] = m[r*cols+c]
		}
	}
	return t
}
