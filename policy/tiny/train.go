package tiny

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"sync"

	"github.com/rlpipe/rlpipe/policy/safetensors"
)

// LossFunc computes a batch's loss from the log-probabilities of its
// completion tokens (under the weights being trained, at each example's
// Temperature) and the entropies of the distributions they were drawn
// from, and writes
// d loss / d logprob for every token into grad. All three are shaped like
// the batch's completions; grad starts at zero. Entropies carry no
// gradient. The slices are only valid during the call.
//
// A GRPO trainer plugs in its clipped surrogate and KL term; NLL is
// supervised training.
type LossFunc func(logprobs, entropies, grad [][]float32) (float64, error)

// NLL is the mean negative log-likelihood over every completion token of
// the batch.
func NLL(logprobs, _, grad [][]float32) (float64, error) { return nllOver(logprobs, grad, nil) }

// maskedNLL is NLL over the tokens masks mark, per example of the batch
// (the replies of an episode, not the observations between them).
func maskedNLL(masks [][]bool) LossFunc {
	return func(logprobs, _, grad [][]float32) (float64, error) { return nllOver(logprobs, grad, masks) }
}

// nllOver is the mean negative log-likelihood over the tokens masks mark
// (every token when masks is nil), with its gradient; unmarked tokens get
// none.
func nllOver(logprobs, grad [][]float32, masks [][]bool) (float64, error) {
	on := func(i, j int) bool { return masks == nil || masks[i][j] }
	n := 0
	for i, l := range logprobs {
		for j := range l {
			if on(i, j) {
				n++
			}
		}
	}
	if n == 0 {
		for _, g := range grad {
			clear(g)
		}
		return 0, nil
	}
	var sum float64
	g := float32(-1 / float64(n))
	for i, l := range logprobs {
		for j, v := range l {
			if on(i, j) {
				sum -= float64(v)
				grad[i][j] = g
			} else {
				grad[i][j] = 0
			}
		}
	}
	return sum / float64(n), nil
}

// TrainConfig configures AdamW and the data-parallel split.
type TrainConfig struct {
	// LR is the learning rate; it must be positive. SetLR changes it
	// between steps.
	LR float64 `json:"lr"`
	// Beta1, Beta2 (default 0.9, 0.999) and Eps (default 1e-8) are Adam's.
	Beta1 float64 `json:"beta1"`
	Beta2 float64 `json:"beta2"`
	Eps   float64 `json:"eps"`
	// WeightDecay is AdamW's decoupled decay (0: none). It applies to the
	// linear layers' and lm_head's weights, or to every LoRA factor.
	WeightDecay float64 `json:"weight_decay"`
	// ClipNorm scales the gradient down to this global L2 norm when it is
	// larger (0: no clipping).
	ClipNorm float64 `json:"clip_norm"`
	// Shards (default 2) splits every batch into that many contiguous
	// parts whose gradients are summed in order: the results depend on
	// Shards but not on Workers, the number of goroutines that compute the
	// shards (default GOMAXPROCS, at most Shards).
	Shards  int `json:"shards"`
	Workers int `json:"-"`
}

func (c *TrainConfig) ensureDefaults() {
	if c.Beta1 == 0 {
		c.Beta1 = 0.9
	}
	if c.Beta2 == 0 {
		c.Beta2 = 0.999
	}
	if c.Eps == 0 {
		c.Eps = 1e-8
	}
	if c.Shards <= 0 {
		c.Shards = 2
	}
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	c.Workers = min(c.Workers, c.Shards)
}

func (c *TrainConfig) validate() error {
	switch {
	case !(c.LR > 0):
		return fmt.Errorf("train config: lr is %g; it must be positive", c.LR)
	case c.Beta1 < 0 || c.Beta1 >= 1 || c.Beta2 < 0 || c.Beta2 >= 1:
		return fmt.Errorf("train config: betas %g, %g must be in [0, 1)", c.Beta1, c.Beta2)
	case c.WeightDecay < 0 || c.ClipNorm < 0:
		return fmt.Errorf("train config: weight decay %g and clip norm %g must be ≥ 0", c.WeightDecay, c.ClipNorm)
	}
	return nil
}

// StepStats reports one optimizer step.
type StepStats struct {
	Step     int     // steps taken, this one included
	Loss     float64 // the LossFunc's value
	GradNorm float64 // global L2 norm of the gradient before clipping
	Tokens   int     // completion tokens in the batch
}

// Trainer takes AdamW steps on a model's base weights (full training) or on
// an adapter's factors (the base frozen).
type Trainer struct {
	m      *Model
	ad     *Adapter // nil: full training
	cfg    TrainConfig
	params []float32 // the trainable vector: m.w.flat or ad.flat
	decay  []segment // ranges of params that decay
	grad   []float32
	mom    []float32
	vel    []float32
	step   int

	merged  []float32 // LoRA: base + update
	critic  *Critic   // a critic's trainer (NewCriticTrainer): params are its factors and head
	shards  []*shard
	gradSum *weights // summed gradient of the (merged) weights
}

type segment struct{ off, n int }

// shard is one part of a batch with its activations and gradient.
type shard struct {
	a       *acts
	ga      gradActs
	g       *weights
	dlogits []float32
	batch   []Example
	starts  []int
	live    int       // rows before the examples marked NoGradient
	dhead   []float32 // a critic's: the value head's gradient
	dvalues []float32 // a critic's: d loss / d value per row
}

// NewTrainer returns a trainer of a's factors, or of m's base weights when
// a is nil. Full training changes m in place; m and a must not be used by
// anything else while Step runs.
func NewTrainer(m *Model, a *Adapter, cfg TrainConfig) (*Trainer, error) {
	cfg.ensureDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if a != nil && a.model != m {
		return nil, fmt.Errorf("new trainer: adapter %q belongs to another model", a.name)
	}
	t := &Trainer{m: m, ad: a, cfg: cfg}
	if a == nil {
		t.params = m.w.flat
		for _, p := range m.lo.params {
			if p.kind == kindMatrix || p.kind == kindResidual {
				t.decay = append(t.decay, segment{p.off, p.size})
			}
		}
	} else {
		t.params = a.flat
		t.decay = []segment{{0, len(a.flat)}}
		t.merged = make([]float32, m.lo.size)
	}
	n := len(t.params)
	t.grad, t.mom, t.vel = make([]float32, n), make([]float32, n), make([]float32, n)
	t.gradSum = m.lo.view(m.cfg, make([]float32, m.lo.size))
	for i := 0; i < cfg.Shards; i++ {
		s, ok := m.shardPool.Get().(*shard)
		if !ok {
			s = &shard{a: newActs(m.cfg), g: m.lo.view(m.cfg, make([]float32, m.lo.size))}
		}
		t.shards = append(t.shards, s)
	}
	return t, nil
}

// Release gives the trainer's work buffers — each shard's activations
// and gradients, tens of megabytes for a demo step — back to the model,
// for its next trainer to reuse instead of allocating and clearing them
// again; t must not be used afterwards. Calling it is optional. Reused
// buffers compute the same bits: a step writes every value it reads, as
// a trainer's second step over its own buffers does.
func (t *Trainer) Release() {
	for _, s := range t.shards {
		s.batch, s.starts, s.dhead, s.dvalues = nil, nil, nil, nil
		t.m.shardPool.Put(s)
	}
	t.shards = nil
}

// SetLR sets the learning rate of the next steps.
func (t *Trainer) SetLR(lr float64) { t.cfg.LR = lr }

// Steps returns the number of steps taken.
func (t *Trainer) Steps() int { return t.step }

// Step computes the loss and gradient of batch and takes one AdamW step.
func (t *Trainer) Step(ctx context.Context, batch []Example, loss LossFunc) (StepStats, error) {
	return t.StepEntropy(ctx, batch, loss.entropyFree())
}

// StepEntropy is Step with a loss of the entropies too (an entropy
// bonus): their gradient flows through the whole distribution.
func (t *Trainer) StepEntropy(ctx context.Context, batch []Example, loss EntropyLossFunc) (StepStats, error) {
	if t.critic != nil {
		return StepStats{}, fmt.Errorf("train step: a critic's trainer steps with StepValues")
	}
	st, err := t.gradients(ctx, batch, loss)
	if err != nil {
		return st, err
	}
	return t.apply(st), nil
}

// apply takes the AdamW step of the gradient in t.grad.
func (t *Trainer) apply(st StepStats) StepStats {
	t.update(st.GradNorm)
	t.step++
	st.Step = t.step
	if t.ad == nil {
		t.m.weightsChanged()
	} else {
		t.ad.changed()
	}
	return st
}

// gradients fills t.grad with the gradient of loss over batch.
func (t *Trainer) gradients(ctx context.Context, batch []Example, loss EntropyLossFunc) (StepStats, error) {
	w, st, err := t.forwardShards(ctx, batch, true)
	if err != nil {
		return st, fmt.Errorf("train step: %w", err)
	}
	lp, ent, grad, gent := ragged(batch), ragged(batch), ragged(batch), ragged(batch)
	at := 0
	for _, s := range t.shards {
		n := len(s.batch)
		s.a.gather(s.batch, s.starts, lp[at:at+n], ent[at:at+n])
		at += n
	}
	l, err := loss(lp, ent, grad, gent)
	if err != nil {
		return st, fmt.Errorf("train step: loss: %w", err)
	}
	st.Loss = l
	for i, e := range batch {
		if e.NoGradient && (!allZero(grad[i]) || !allZero(gent[i])) {
			return st, fmt.Errorf("train step: example %d is marked NoGradient, but the loss gave its tokens a gradient", i)
		}
	}
	at = 0
	full := t.ad == nil
	for _, s := range t.shards {
		n := len(s.batch)
		s.fillDlogits(grad[at:at+n], gent[at:at+n])
		at += n
	}
	if err := t.parallel(ctx, func(s *shard) {
		clear(s.g.flat)
		w.backward(s.a.first(s.live), &s.ga, s.g, full, s.dlogits)
	}); err != nil {
		return st, fmt.Errorf("train step: %w", err)
	}
	sumShards(t.gradSum.flat, t.shards, func(s *shard) []float32 { return s.g.flat })
	if full {
		copy(t.grad, t.gradSum.flat)
	} else {
		t.ad.loraGrads(t.gradSum, t.grad)
	}
	st.GradNorm = norm2(t.grad)
	return st, nil
}

// forwardShards checks batch, splits it over the shards and runs the
// weights being trained over each (in parallel), returning them and the
// batch's token count. With temper, each example's logprobs are of
// softmax(z/T) at its Temperature (the policy; the critic reads no
// logprobs).
func (t *Trainer) forwardShards(ctx context.Context, batch []Example, temper bool) (*weights, StepStats, error) {
	var st StepStats
	for i, e := range batch {
		if err := t.m.checkExample(i, e); err != nil {
			return nil, st, err
		}
		st.Tokens += len(e.Completion)
	}
	w := t.m.w
	if t.ad != nil {
		w = t.ad.mergeInto(t.merged)
	}
	S := len(t.shards)
	for i, s := range t.shards {
		s.batch = batch[i*len(batch)/S : (i+1)*len(batch)/S]
	}
	err := t.parallel(ctx, func(s *shard) {
		// The policy's steps pack the examples that take no gradient
		// last, so that its backward pass stops before them.
		s.starts, s.live = s.a.packLive(s.batch, temper)
		w.forward(s.a, nil)
		if temper {
			s.a.temper(s.batch, s.starts)
		}
	})
	return w, st, err
}

// allZero says whether every value of v is zero.
func allZero(v []float32) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

// sumShards sets sum to the sum over the shards of part(shard), in
// shard order.
func sumShards(sum []float32, shards []*shard, part func(*shard) []float32) {
	copy(sum, part(shards[0]))
	for _, s := range shards[1:] {
		for i, v := range part(s) {
			sum[i] += v
		}
	}
}

// fillDlogits turns d loss / d logprob of each completion token into the
// gradient of the logits: g·(onehot − p) on the row that predicted it,
// or (g/T)·(onehot − p_T) for an example sampled at temperature T, whose
// log-probabilities are those of softmax(z/T); and d loss / d entropy
// (gent) into g_H·∂H/∂z (entropyDlogits), ×1/T likewise, the entropy
// being softmax(z/T)'s.
func (s *shard) fillDlogits(grad, gent [][]float32) {
	a := s.a
	V := a.cfg.VocabSize()
	s.dlogits = grow(s.dlogits, a.rows*V)
	clear(s.dlogits)
	for i, e := range s.batch {
		scale := e.gradScale()
		for j, tok := range e.Completion {
			g, gh := grad[i][j], gent[i][j]
			if g == 0 && gh == 0 {
				continue
			}
			if scale != 1 {
				g, gh = g*scale, gh*scale
			}
			r := s.starts[i] + len(e.Prompt) + j
			lp := a.logp[r*V : (r+1)*V]
			dl := s.dlogits[r*V : (r+1)*V]
			if gh != 0 {
				entropyDlogits(lp, a.ent[r], gh, dl)
			}
			if g == 0 {
				continue
			}
			for k := 0; k < V; k++ {
				dl[k] -= g * exp32(lp[k])
			}
			dl[tok] += g
		}
	}
}

// parallel runs f on every shard with cfg.Workers goroutines; shard i goes
// to worker i mod Workers.
func (t *Trainer) parallel(ctx context.Context, f func(*shard)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	W := t.cfg.Workers
	if W <= 1 {
		for _, s := range t.shards {
			f(s)
		}
		return nil
	}
	var wg sync.WaitGroup
	for wk := 0; wk < W; wk++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := wk; i < len(t.shards); i += W {
				f(t.shards[i])
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// update applies AdamW to t.params with t.grad, clipped to cfg.ClipNorm.
func (t *Trainer) update(norm float64) {
	c := t.cfg
	scale := 1.0
	if c.ClipNorm > 0 && norm > c.ClipNorm {
		scale = c.ClipNorm / (norm + 1e-6)
	}
	step := t.step + 1
	bc1 := 1 - powInt(c.Beta1, step)
	bc2 := 1 - powInt(c.Beta2, step)
	decayFactor := 1 - c.LR*c.WeightDecay
	apply := func(lo, hi int, decay bool) {
		for i := lo; i < hi; i++ {
			g := float64(t.grad[i]) * scale
			m := c.Beta1*float64(t.mom[i]) + (1-c.Beta1)*g
			v := c.Beta2*float64(t.vel[i]) + (1-c.Beta2)*g*g
			t.mom[i], t.vel[i] = float32(m), float32(v)
			p := float64(t.params[i])
			if decay {
				p *= decayFactor
			}
			p -= c.LR * (m / bc1) / (math.Sqrt(v/bc2) + c.Eps)
			t.params[i] = float32(p)
		}
	}
	at := 0
	for _, s := range t.decay {
		apply(at, s.off, false)
		apply(s.off, s.off+s.n, true)
		at = s.off + s.n
	}
	apply(at, len(t.params), false)
}

// powInt returns x^n by repeated squaring, the same on every machine.
func powInt(x float64, n int) float64 {
	r := 1.0
	for n > 0 {
		if n&1 == 1 {
			r *= x
		}
		x *= x
		n >>= 1
	}
	return r
}

// State file metadata keys.
const (
	metaStep  = "step"
	metaMode  = "mode"
	metaTrain = "train_config"
)

// SaveState writes the optimizer state — the step count, AdamW's moments
// and the trainable parameters themselves — to a safetensors file, so that
// LoadState on a fresh Trainer continues the run bit for bit.
func (t *Trainer) SaveState(path string) error { return t.SaveStateWith(path, nil) }

// SaveStateWith is SaveState with the safetensors write options (nil:
// SaveState's).
func (t *Trainer) SaveStateWith(path string, o *safetensors.WriteOptions) error {
	cfg, err := json.Marshal(t.cfg)
	if err != nil {
		return fmt.Errorf("save optimizer state: encode the train config: %w", err)
	}
	f := safetensors.NewFile(map[string]string{
		metaFormat: formatName + "/optimizer",
		metaStep:   strconv.Itoa(t.step),
		metaMode:   t.mode(),
		metaTrain:  string(cfg),
	})
	n := len(t.params)
	f.Tensors["params"] = safetensors.FromFloat32([]int{n}, t.params)
	f.Tensors["exp_avg"] = safetensors.FromFloat32([]int{n}, t.mom)
	f.Tensors["exp_avg_sq"] = safetensors.FromFloat32([]int{n}, t.vel)
	if err := safetensors.WriteFileWith(path, f, o); err != nil {
		return fmt.Errorf("save optimizer state: %w", err)
	}
	return nil
}

func (t *Trainer) mode() string {
	if t.ad == nil {
		return "full"
	}
	if t.critic != nil {
		return fmt.Sprintf("critic lora r=%d modules=%d head=%d", t.ad.rank, len(t.ad.mods), len(t.critic.head))
	}
	return fmt.Sprintf("lora r=%d modules=%d", t.ad.rank, len(t.ad.mods))
}

// LoadState restores what SaveState wrote: step count, moments and
// trainable parameters (into the model or adapter being trained). The
// learning rate and other settings stay those of the Trainer.
func (t *Trainer) LoadState(path string) error {
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return fmt.Errorf("load optimizer state: %w", err)
	}
	if got := f.Metadata[metaMode]; got != t.mode() {
		return fmt.Errorf("load optimizer state %s: it trains %q, this trainer %q", path, got, t.mode())
	}
	step, err := strconv.Atoi(f.Metadata[metaStep])
	if err != nil {
		return fmt.Errorf("load optimizer state %s: step: %w", path, err)
	}
	vals := map[string][]float32{}
	for _, name := range []string{"params", "exp_avg", "exp_avg_sq"} {
		v, err := f.Float32(name)
		if err != nil {
			return fmt.Errorf("load optimizer state %s: %w", path, err)
		}
		if len(v) != len(t.params) {
			return fmt.Errorf("load optimizer state %s: tensor %q has %d values, the trainer %d", path, name, len(v), len(t.params))
		}
		vals[name] = v
	}
	copy(t.params, vals["params"])
	copy(t.mom, vals["exp_avg"])
	copy(t.vel, vals["exp_avg_sq"])
	t.step = step
	if t.ad == nil {
		t.m.weightsChanged()
	} else {
		t.ad.changed()
	}
	return nil
}
