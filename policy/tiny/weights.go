package tiny

import (
	"fmt"
	"math/rand/v2"
)

// linear is one linear layer y = x·w + b. w is stored [in, out] so that the
// forward product needs no transpose (see kernels.go); files store it the
// PyTorch way, [out, in].
type linear struct {
	in, out int
	w       []float32
	b       []float32 // nil for lm_head
}

type block struct {
	ln1g, ln1b []float32
	q, k, v, o linear
	ln2g, ln2b []float32
	up, down   linear
}

// weights views one flat parameter vector as the model's tensors.
type weights struct {
	cfg        Config
	flat       []float32
	tok        []float32 // [V, d]
	pos        []float32 // [ctx, d]
	blocks     []block
	lnfg, lnfb []float32
	head       linear // [d, V], no bias
}

// paramKind says how a parameter is initialised and decayed.
type paramKind int

const (
	kindEmbed paramKind = iota
	kindGain
	kindBias
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
	path    string // "layers.0.attn.q_proj"
	in, out int
	weight  int // index of its weight in the layout
}

// layout lists the parameters in file order (which is also the flat
// vector's order) and the adaptable modules.
type layout struct {
	params  []paramSpec
	modules []moduleSpec
	size    int
}

// Module names, the suffixes LoRA target_modules refer to.
var moduleNames = []string{"q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj"}

func newLayout(c Config) *layout {
	lo := &layout{}
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
		add(path+".bias", kindBias, false, out)
		lo.modules = append(lo.modules, moduleSpec{path: path, in: in, out: out, weight: i})
	}
	d, V := c.Dim, c.VocabSize()
	add("embed_tokens.weight", kindEmbed, false, V, d)
	add("embed_positions.weight", kindEmbed, false, c.Context, d)
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("layers.%d.", l)
		add(p+"attn_norm.weight", kindGain, false, d)
		add(p+"attn_norm.bias", kindBias, false, d)
		lin(p+"attn.q_proj", d, d, kindMatrix)
		lin(p+"attn.k_proj", d, d, kindMatrix)
		lin(p+"attn.v_proj", d, d, kindMatrix)
		lin(p+"attn.o_proj", d, d, kindResidual)
		add(p+"mlp_norm.weight", kindGain, false, d)
		add(p+"mlp_norm.bias", kindBias, false, d)
		lin(p+"mlp.up_proj", d, c.Hidden, kindMatrix)
		lin(p+"mlp.down_proj", c.Hidden, d, kindResidual)
	}
	add("norm.weight", kindGain, false, d)
	add("norm.bias", kindBias, false, d)
	add("lm_head.weight", kindMatrix, true, V, d)
	return lo
}

// view carves flat (of the layout's size) into tensors.
func (lo *layout) view(c Config, flat []float32) *weights {
	w := &weights{cfg: c, flat: flat}
	i := 0
	next := func() []float32 {
		p := lo.params[i]
		i++
		return flat[p.off : p.off+p.size : p.off+p.size]
	}
	lin := func(in, out int, bias bool) linear {
		l := linear{in: in, out: out, w: next()}
		if bias {
			l.b = next()
		}
		return l
	}
	d := c.Dim
	w.tok = next()
	w.pos = next()
	w.blocks = make([]block, c.Layers)
	for l := range w.blocks {
		b := &w.blocks[l]
		b.ln1g, b.ln1b = next(), next()
		b.q = lin(d, d, true)
		b.k = lin(d, d, true)
		b.v = lin(d, d, true)
		b.o = lin(d, d, true)
		b.ln2g, b.ln2b = next(), next()
		b.up = lin(d, c.Hidden, true)
		b.down = lin(c.Hidden, d, true)
	}
	w.lnfg, w.lnfb = next(), next()
	w.head = lin(d, c.VocabSize(), false)
	return w
}

// linears returns the adaptable layers in layout order (that of
// layout.modules).
func (w *weights) linears() []*linear {
	var ls []*linear
	for l := range w.blocks {
		b := &w.blocks[l]
		ls = append(ls, &b.q, &b.k, &b.v, &b.o, &b.up, &b.down)
	}
	return ls
}

// initWeights fills flat the GPT-2 way: normal(0, 0.02) matrices and
// embeddings, residual projections scaled by 1/√(2·layers), zero biases,
// unit gains.
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
		case kindBias:
			clear(v)
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
