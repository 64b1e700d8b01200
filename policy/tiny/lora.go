package tiny

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"gonum.org/v1/gonum/blas"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/safetensors"
)

// LoRAConfig describes a new adapter.
type LoRAConfig struct {
	// Name appears in policy versions ("tiny-arith@…+<name>"); "" means
	// "lora".
	Name string
	// Rank r (default 8) and Alpha (default 16): the update is
	// (Alpha/Rank)·B·A.
	Rank  int
	Alpha float64
	// Targets lists the module names to adapt, from q_proj, k_proj, v_proj,
	// o_proj, gate_proj, up_proj and down_proj; nil adapts all of them in
	// every layer.
	Targets []string
	// Seed initialises A (uniform in ±1/√in, as PEFT does); B starts at 0,
	// so a new adapter leaves the model unchanged.
	Seed uint64
}

// Adapter is a LoRA adapter of a Model: for each adapted linear layer y =
// x·Wᵀ it adds (α/r)·x·Aᵀ·Bᵀ, with A [r, in] and B [out, r] as PEFT
// stores them. Scoring and sampling with an adapter are safe for
// concurrent use; training it (a Trainer) is not, with anything.
type Adapter struct {
	name    string
	model   *Model
	rank    int
	alpha   float64
	targets []string
	mods    []loraModule
	flat    []float32 // every module's a then b

	mu     sync.Mutex
	merged *weights // base + update, built on first use after a change
}

// loraModule holds one layer's factors in compute layout: a = Aᵀ [in, r]
// and b = Bᵀ [r, out], so that x·a·b needs no transpose.
type loraModule struct {
	spec moduleSpec
	idx  int // position in the model's linears
	a, b []float32
}

// Name returns the adapter's name.
func (a *Adapter) Name() string { return a.name }

// Rank returns r.
func (a *Adapter) Rank() int { return a.rank }

// Scaling returns α/r.
func (a *Adapter) Scaling() float64 { return a.alpha / float64(a.rank) }

// NumParams returns the number of trainable parameters.
func (a *Adapter) NumParams() int { return len(a.flat) }

// Modules returns the paths of the adapted layers, e.g.
// "model.layers.0.self_attn.q_proj".
func (a *Adapter) Modules() []string {
	out := make([]string, len(a.mods))
	for i, m := range a.mods {
		out[i] = m.spec.path
	}
	return out
}

// Clone returns a copy of the adapter under a new name.
func (a *Adapter) Clone(name string) *Adapter {
	c := a.model.allocAdapter(name, a.rank, a.alpha, a.targets, a.moduleIdx())
	copy(c.flat, a.flat)
	return c
}

func (a *Adapter) moduleIdx() []int {
	idx := make([]int, len(a.mods))
	for i, m := range a.mods {
		idx[i] = m.idx
	}
	return idx
}

// NewAdapter returns a fresh adapter for m: A random (seeded), B zero.
func (m *Model) NewAdapter(cfg LoRAConfig) (*Adapter, error) {
	if cfg.Name == "" {
		cfg.Name = "lora"
	}
	if cfg.Rank == 0 {
		cfg.Rank = 8
	}
	if cfg.Alpha == 0 {
		cfg.Alpha = 16
	}
	if cfg.Rank < 0 || cfg.Alpha < 0 || math.IsNaN(cfg.Alpha) {
		return nil, fmt.Errorf("new adapter: rank %d and alpha %g must be positive", cfg.Rank, cfg.Alpha)
	}
	targets := cfg.Targets
	if targets == nil {
		targets = moduleNames
	}
	for _, t := range targets {
		if !slices.Contains(moduleNames, t) {
			return nil, fmt.Errorf("new adapter: target module %q is not one of %s", t, strings.Join(moduleNames, ", "))
		}
	}
	var idx []int
	for i, s := range m.lo.modules {
		if slices.Contains(targets, s.path[strings.LastIndexByte(s.path, '.')+1:]) {
			idx = append(idx, i)
		}
	}
	a := m.allocAdapter(cfg.Name, cfg.Rank, cfg.Alpha, targets, idx)
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6c6f7261696e6974)) // "lorainit"
	for _, mod := range a.mods {
		bound := 1 / math.Sqrt(float64(mod.spec.in))
		for i := range mod.a {
			mod.a[i] = float32((2*rng.Float64() - 1) * bound)
		}
	}
	return a, nil
}

func (m *Model) allocAdapter(name string, rank int, alpha float64, targets []string, idx []int) *Adapter {
	a := &Adapter{name: name, model: m, rank: rank, alpha: alpha, targets: slices.Clone(targets)}
	n := 0
	for _, i := range idx {
		s := m.lo.modules[i]
		n += rank * (s.in + s.out)
	}
	a.flat = make([]float32, n)
	off := 0
	for _, i := range idx {
		s := m.lo.modules[i]
		mod := loraModule{spec: s, idx: i}
		mod.a = a.flat[off : off+s.in*rank : off+s.in*rank]
		off += s.in * rank
		mod.b = a.flat[off : off+rank*s.out : off+rank*s.out]
		off += rank * s.out
		a.mods = append(a.mods, mod)
	}
	return a
}

// Save writes the adapter as a PEFT adapter directory (see
// policy/safetensors), with the base model's version as
// base_model_name_or_path.
func (a *Adapter) Save(dir string) error { return a.SaveWith(dir, nil) }

// SaveWith is Save with the safetensors write options (nil: Save's).
func (a *Adapter) SaveWith(dir string, o *safetensors.WriteOptions) error {
	cfg := safetensors.NewAdapterConfig(a.model.Version(), a.rank, a.alpha, a.targets)
	mods := make(map[string]safetensors.LoRA, len(a.mods))
	for _, m := range a.mods {
		mods[m.spec.path] = safetensors.LoRA{
			A: safetensors.FromFloat32([]int{a.rank, m.spec.in}, transpose(m.a, m.spec.in, a.rank)),
			B: safetensors.FromFloat32([]int{m.spec.out, a.rank}, transpose(m.b, a.rank, m.spec.out)),
		}
	}
	if err := safetensors.WriteAdapterDirWith(dir, cfg, mods, o); err != nil {
		return fmt.Errorf("save adapter %q: %w", a.name, err)
	}
	return nil
}

// LoadAdapter reads a PEFT adapter directory written for m (by Save or by
// PEFT for a model with the same module names), naming it after the
// directory. A tensor whose shape does not fit m is an error wrapping
// policy.ErrAdapterShape that names the tensor and both shapes; a module m
// does not have is an error too.
func (m *Model) LoadAdapter(dir string) (*Adapter, error) {
	return m.loadAdapter(filepath.Base(filepath.Clean(dir)), dir)
}

func (m *Model) loadAdapter(name, dir string) (*Adapter, error) {
	cfg, mods, err := safetensors.ReadAdapterDir(dir)
	if err != nil {
		return nil, fmt.Errorf("load adapter %q: %w", name, err)
	}
	wpath := filepath.Join(dir, safetensors.AdapterWeightsFile)
	var idx []int
	for i, s := range m.lo.modules {
		if _, ok := mods[s.path]; ok {
			idx = append(idx, i)
		}
	}
	if len(idx) != len(mods) {
		paths := make([]string, 0, len(mods))
		for p := range mods {
			paths = append(paths, p)
		}
		slices.Sort(paths)
		for _, p := range paths {
			if !slices.ContainsFunc(m.lo.modules, func(s moduleSpec) bool { return s.path == p }) {
				an, _ := safetensors.LoRATensorNames(p)
				return nil, fmt.Errorf("load adapter %q from %s: tensor %q: %s has no module %q (its modules are model.layers.<0..%d>.self_attn.{q,k,v,o}_proj and model.layers.<0..%d>.mlp.{gate,up,down}_proj): %w",
					name, wpath, an, m.cfg.Name, p, m.cfg.Layers-1, m.cfg.Layers-1, policy.ErrAdapterShape)
			}
		}
	}
	targets := cfg.TargetModules
	if targets == nil {
		targets = moduleNames
	}
	a := m.allocAdapter(name, cfg.R, cfg.LoraAlpha, targets, idx)
	for _, mod := range a.mods {
		l := mods[mod.spec.path]
		an, bn := safetensors.LoRATensorNames(mod.spec.path)
		if want := []int{cfg.R, mod.spec.in}; !slices.Equal(l.A.Shape, want) {
			return nil, fmt.Errorf("load adapter %q from %s: tensor %q has shape %v, the base model needs %v: %w", name, wpath, an, l.A.Shape, want, policy.ErrAdapterShape)
		}
		if want := []int{mod.spec.out, cfg.R}; !slices.Equal(l.B.Shape, want) {
			return nil, fmt.Errorf("load adapter %q from %s: tensor %q has shape %v, the base model needs %v: %w", name, wpath, bn, l.B.Shape, want, policy.ErrAdapterShape)
		}
		av, err := l.A.Float32()
		if err != nil {
			return nil, fmt.Errorf("load adapter %q from %s: tensor %q: %w", name, wpath, an, err)
		}
		bv, err := l.B.Float32()
		if err != nil {
			return nil, fmt.Errorf("load adapter %q from %s: tensor %q: %w", name, wpath, bn, err)
		}
		copy(mod.a, transpose(av, cfg.R, mod.spec.in))
		copy(mod.b, transpose(bv, mod.spec.out, cfg.R))
	}
	return a, nil
}

// changed drops the cached merged weights after the factors changed.
func (a *Adapter) changed() {
	a.mu.Lock()
	a.merged = nil
	a.mu.Unlock()
}

// weightsFor returns the weights to run: the base, or base plus the
// adapter's update.
func (m *Model) weightsFor(a *Adapter) (*weights, error) {
	if a == nil {
		return m.w, nil
	}
	if a.model != m {
		return nil, fmt.Errorf("adapter %q belongs to another model", a.name)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.merged == nil {
		a.merged = a.mergeInto(make([]float32, m.lo.size))
	}
	return a.merged, nil
}

// mergeInto writes W + (α/r)·Aᵀ·Bᵀ (in compute layout, a·b) for every
// adapted layer, and the base everywhere else, into flat.
func (a *Adapter) mergeInto(flat []float32) *weights {
	m := a.model
	copy(flat, m.w.flat)
	w := m.lo.view(m.cfg, flat)
	lins := w.linears()
	s := float32(a.Scaling())
	for _, mod := range a.mods {
		l := lins[mod.idx]
		blasImpl.Sgemm(blas.NoTrans, blas.NoTrans, l.in, l.out, a.rank, s, mod.a, a.rank, mod.b, l.out, 1, l.w, l.out)
	}
	return w
}

// loraGrads turns gradients of the merged weights (gw) into gradients of
// the factors: dA = s·dW·bᵀ, dB = s·aᵀ·dW in compute layout.
func (a *Adapter) loraGrads(gw *weights, grad []float32) {
	lins := gw.linears()
	s := float32(a.Scaling())
	off := 0
	for _, mod := range a.mods {
		l := lins[mod.idx]
		r := a.rank
		da := grad[off : off+l.in*r]
		off += l.in * r
		db := grad[off : off+r*l.out]
		off += r * l.out
		blasImpl.Sgemm(blas.NoTrans, blas.Trans, l.in, r, l.out, s, l.w, l.out, mod.b, l.out, 0, da, r)
		blasImpl.Sgemm(blas.Trans, blas.NoTrans, r, l.out, l.in, s, mod.a, r, l.w, l.out, 0, db, l.out)
	}
}
