package tiny

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"

	"github.com/rlpipe/rlpipe/policy/safetensors"
)

// The value head's file in a critic directory and its tensors, as the
// torch reference script names them: weight [1, Dim] and bias [1],
// float32.
const (
	ValueHeadFile   = "value_head.safetensors"
	ValueHeadWeight = "v_head.weight"
	ValueHeadBias   = "v_head.bias"
)

// Critic is PPO's value model on a Model's frozen base: a LoRA adapter of
// its own and a value head, Linear(Dim → 1) with a bias, on the final
// norm's output (Hugging Face's hidden_states[-1] of a Llama). The value
// of completion token t is the head's output at the position that
// predicts t, the row whose logits give t's log-probability. Values and
// a Trainer's StepValues are safe to call between steps only.
type Critic struct {
	ad   *Adapter
	flat []float32 // the adapter's factors, then the head's Dim weights and its bias
	head []float32 // flat's last Dim+1 values
}

// NewCritic returns a fresh critic of m: the adapter as NewAdapter makes
// it (A seeded, B zero) and the head's weight and bias zero, so every
// value starts at 0.
func (m *Model) NewCritic(cfg LoRAConfig) (*Critic, error) {
	if cfg.Name == "" {
		cfg.Name = "critic"
	}
	ad, err := m.NewAdapter(cfg)
	if err != nil {
		return nil, fmt.Errorf("new critic: %w", err)
	}
	return newCritic(ad), nil
}

// newCritic lays ad's factors and a zero head out in one vector, the one
// a Trainer steps.
func newCritic(ad *Adapter) *Critic {
	n := len(ad.flat)
	flat := make([]float32, n+ad.model.cfg.Dim+1)
	ad.rebase(flat[:n:n])
	return &Critic{ad: ad, flat: flat, head: flat[n:]}
}

// rebase moves the factors into flat, which has their length.
func (a *Adapter) rebase(flat []float32) {
	copy(flat, a.flat)
	off := 0
	for i := range a.mods {
		mod := &a.mods[i]
		na, nb := len(mod.a), len(mod.b)
		mod.a = flat[off : off+na : off+na]
		off += na
		mod.b = flat[off : off+nb : off+nb]
		off += nb
	}
	a.flat = flat
	a.changed()
}

// LoadCritic reads a critic directory written by Critic.Save (or by the
// torch reference script): a PEFT adapter and ValueHeadFile. Errors name
// the file and the tensor.
func (m *Model) LoadCritic(dir string) (*Critic, error) {
	ad, err := m.loadAdapter("critic", dir)
	if err != nil {
		return nil, fmt.Errorf("load critic: %w", err)
	}
	c := newCritic(ad)
	path := filepath.Join(dir, ValueHeadFile)
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load critic: %w", err)
	}
	d := m.cfg.Dim
	for _, t := range []struct {
		name  string
		shape []int
		into  []float32
	}{{ValueHeadWeight, []int{1, d}, c.head[:d]}, {ValueHeadBias, []int{1}, c.head[d:]}} {
		if got := f.Tensors[t.name].Shape; !slices.Equal(got, t.shape) {
			return nil, fmt.Errorf("load critic %s: tensor %q has shape %v, the base model needs %v", path, t.name, got, t.shape)
		}
		v, err := f.Float32(t.name)
		if err != nil {
			return nil, fmt.Errorf("load critic %s: %w", path, err)
		}
		copy(t.into, v)
	}
	return c, nil
}

// Save writes the critic into dir: the adapter as a PEFT directory and
// the head as ValueHeadFile. The same critic writes the same bytes.
func (c *Critic) Save(dir string) error { return c.SaveWith(dir, nil) }

// SaveWith is Save with the safetensors write options (nil: Save's).
func (c *Critic) SaveWith(dir string, o *safetensors.WriteOptions) error {
	if err := c.ad.SaveWith(dir, o); err != nil {
		return fmt.Errorf("save critic: %w", err)
	}
	d := c.ad.model.cfg.Dim
	f := safetensors.NewFile(nil)
	f.Tensors[ValueHeadWeight] = safetensors.FromFloat32([]int{1, d}, c.head[:d])
	f.Tensors[ValueHeadBias] = safetensors.FromFloat32([]int{1}, c.head[d:])
	if err := safetensors.WriteFileWith(filepath.Join(dir, ValueHeadFile), f, o); err != nil {
		return fmt.Errorf("save critic: %w", err)
	}
	return nil
}

// Adapter returns the critic's LoRA adapter.
func (c *Critic) Adapter() *Adapter { return c.ad }

// Targets returns the adapted module names (q_proj, …) the adapter was
// made or loaded with.
func (a *Adapter) Targets() []string { return slices.Clone(a.targets) }

// NumParams returns the number of trainable parameters: the factors and
// the head's Dim+1.
func (c *Critic) NumParams() int { return len(c.flat) }

// Values returns the critic's value of every completion token of batch,
// shaped like the completions (see Critic for which position gives it).
func (m *Model) Values(ctx context.Context, c *Critic, batch []Example) ([][]float64, error) {
	for i, e := range batch {
		if err := m.checkExample(i, e); err != nil {
			return nil, fmt.Errorf("values: %w", err)
		}
	}
	w, err := m.weightsFor(c.ad)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	values := ragged64(batch)
	err = m.forwardChunks(ctx, w, batch, func(ac *acts, lo, hi int, starts []int) {
		ac.values(c.head, batch[lo:hi], starts, values[lo:hi])
	})
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	return values, nil
}

// values writes the head's output on the row predicting each completion
// token of batch into out.
func (a *acts) values(head []float32, batch []Example, starts []int, out [][]float64) {
	for i, e := range batch {
		for j := range e.Completion {
			out[i][j] = a.value(head, starts[i]+len(e.Prompt)+j)
		}
	}
}

// value is the head's output on row r: hf[r]·w + b.
func (a *acts) value(head []float32, r int) float64 {
	d := a.cfg.Dim
	var v float32
	for i, h := range a.hf[r*d : (r+1)*d] {
		v += h * head[i]
	}
	return float64(v + head[d])
}

// ragged64 is ragged in float64.
func ragged64(batch []Example) [][]float64 {
	out := make([][]float64, len(batch))
	for i, e := range batch {
		out[i] = make([]float64, len(e.Completion))
	}
	return out
}

// ValueLossFunc computes a batch's value loss from the critic's values of
// its completion tokens and writes d loss / d value for every token into
// grad (shaped like values, starting at zero). The slices are only valid
// during the call.
type ValueLossFunc func(values, grad [][]float64) (float64, error)

// NewCriticTrainer returns a trainer of c's factors and value head (the
// base frozen), stepped with StepValues. Weight decay applies to all of
// them, as to an actor adapter's factors.
func NewCriticTrainer(m *Model, c *Critic, cfg TrainConfig) (*Trainer, error) {
	if c.ad.model != m {
		return nil, fmt.Errorf("new critic trainer: the critic belongs to another model")
	}
	t, err := NewTrainer(m, c.ad, cfg)
	if err != nil {
		return nil, err
	}
	t.critic = c
	t.params = c.flat
	t.decay = []segment{{0, len(c.flat)}}
	n := len(c.flat)
	t.grad, t.mom, t.vel = make([]float32, n), make([]float32, n), make([]float32, n)
	for _, s := range t.shards {
		s.dhead = make([]float32, len(c.head))
	}
	return t, nil
}

// StepValues computes the value loss of batch and its gradient with
// respect to the critic's factors and head, and takes one AdamW step.
func (t *Trainer) StepValues(ctx context.Context, batch []Example, loss ValueLossFunc) (StepStats, error) {
	if t.critic == nil {
		return StepStats{}, fmt.Errorf("value step: the trainer has no critic (make it with NewCriticTrainer)")
	}
	st, err := t.valueGradients(ctx, batch, loss)
	if err != nil {
		return st, err
	}
	return t.apply(st), nil
}

// valueGradients fills t.grad with the gradient of loss over batch: the
// factors' first, then the head's.
func (t *Trainer) valueGradients(ctx context.Context, batch []Example, loss ValueLossFunc) (StepStats, error) {
	c := t.critic
	w, st, err := t.forwardShards(ctx, batch, false)
	if err != nil {
		return st, fmt.Errorf("value step: %w", err)
	}
	values, grad := ragged64(batch), ragged64(batch)
	at := 0
	for _, s := range t.shards {
		n := len(s.batch)
		s.a.values(c.head, s.batch, s.starts, values[at:at+n])
		at += n
	}
	l, err := loss(values, grad)
	if err != nil {
		return st, fmt.Errorf("value step: loss: %w", err)
	}
	st.Loss = l
	at = 0
	for _, s := range t.shards {
		n := len(s.batch)
		s.fillDvalues(grad[at : at+n])
		at += n
	}
	if err := t.parallel(ctx, func(s *shard) {
		clear(s.g.flat)
		clear(s.dhead)
		w.backwardValues(s.a, &s.ga, s.g, c.head, s.dhead, s.dvalues)
	}); err != nil {
		return st, fmt.Errorf("value step: %w", err)
	}
	sumShards(t.gradSum.flat, t.shards, func(s *shard) []float32 { return s.g.flat })
	n := len(t.ad.flat)
	t.ad.loraGrads(t.gradSum, t.grad[:n])
	sumShards(t.grad[n:], t.shards, func(s *shard) []float32 { return s.dhead })
	st.GradNorm = norm2(t.grad)
	return st, nil
}

// fillDvalues puts d loss / d value of each completion token on the row
// that predicts it; the other rows get 0.
func (s *shard) fillDvalues(grad [][]float64) {
	s.dvalues = grow(s.dvalues, s.a.rows)
	clear(s.dvalues)
	for i, e := range s.batch {
		for j := range e.Completion {
			s.dvalues[s.starts[i]+len(e.Prompt)+j] = float32(grad[i][j])
		}
	}
}

// backwardValues back-propagates dv, d loss / d value of each row's value
// head output, through the packed forward pass in a: the head's gradient
// is added to dhead (Dim weights, then the bias), and the gradient at the
// final norm's output, head.weight·dv, enters the model's backward pass,
// which adds the adaptable layers' gradients to g.
func (w *weights) backwardValues(a *acts, ga *gradActs, g *weights, head, dhead, dv []float32) {
	d := w.cfg.Dim
	ga.reset(w.cfg, a.rows)
	for r := 0; r < a.rows; r++ {
		dh := ga.dh[r*d : (r+1)*d]
		v := dv[r]
		if v == 0 {
			clear(dh)
			continue
		}
		for i, h := range a.hf[r*d : (r+1)*d] {
			dh[i] = head[i] * v
			dhead[i] += h * v
		}
		dhead[d] += v
	}
	w.backwardFromNorm(a, ga, g, false)
}

// norm2 is the L2 norm of v.
func norm2(v []float32) float64 {
	var sq float64
	for _, g := range v {
		sq += float64(g) * float64(g)
	}
	return math.Sqrt(sq)
}
