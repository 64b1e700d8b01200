package tiny

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
)

// smallConfig is a model small enough for finite differences under -race.
func smallConfig() Config {
	return Config{Name: "small", Vocab: "0123456789+-=", Dim: 16, Heads: 2, Layers: 2, Hidden: 24, Context: 16}
}

// randomModel returns a model whose every parameter is random, so that
// every gradient is exercised.
func randomModel(t testing.TB, cfg Config, seed uint64) *Model {
	t.Helper()
	m, err := New(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	for _, p := range m.lo.params {
		v := m.w.flat[p.off : p.off+p.size]
		for i := range v {
			switch p.kind {
			case kindGain:
				v[i] = float32(1 + 0.2*rng.NormFloat64())
			default:
				v[i] = float32(0.15 * rng.NormFloat64())
			}
		}
	}
	return m
}

// randomAdapter returns a rank-3 adapter of m whose factors are all
// random, B too (NewAdapter starts it at zero), so that every adapter
// gradient is exercised; seed picks the factors.
func randomAdapter(t testing.TB, m *Model, seed uint64) *Adapter {
	t.Helper()
	a, err := m.NewAdapter(LoRAConfig{Rank: 3, Alpha: 6, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(8, seed))
	for i := range a.flat {
		a.flat[i] = float32(0.3 * rng.NormFloat64())
	}
	a.changed()
	return a
}

// testBatch returns problems as examples; with odd, some completions are
// truncated so sequences differ in length.
func testBatch(t testing.TB, m *Model, n int, seed uint64) []Example {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	batch := make([]Example, n)
	for i := range batch {
		e, err := m.Example(TrainingProblem(rng))
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 1 {
			e.Completion = e.Completion[:1+rng.IntN(len(e.Completion))]
		}
		batch[i] = e
	}
	return batch
}

// weightedLoss is Σ c·logprob with fixed pseudo-random weights c, so that
// every token's gradient differs.
func weightedLoss(logprobs, _, grad [][]float32) (float64, error) {
	return weightedSum(logprobs, func(i, j int, c float32) { grad[i][j] = c }), nil
}

// weightedSum is Σ c·v over the rows of lp in order, the k-th value
// (counted across rows) weighted by c = sin(1.7k) − 0.2 in float32; each,
// when not nil, is told every row i, column j and its weight.
func weightedSum[F float32 | float64](lp [][]F, each func(i, j int, c float32)) float64 {
	var s float64
	k := 0
	for i, l := range lp {
		for j, v := range l {
			c := float32(math.Sin(float64(k)*1.7)) - 0.2
			k++
			s += float64(c) * float64(v)
			if each != nil {
				each(i, j, c)
			}
		}
	}
	return s
}

// checkGrads compares grad, the analytic gradient with respect to params
// (the base weights, or the adapter's factors when a is not nil), with
// central differences of the float64 reference at a sample of indices.
func checkGrads(t *testing.T, m *Model, a *Adapter, batch []Example, grad []float32, idx []int) {
	t.Helper()
	checkGradsOf(t, m, a, batch, grad, idx, func(lp, _ [][]float64) float64 { return refWeightedLoss(lp) })
}

// checkGradsOf is checkGrads for the loss refLoss computes from the
// reference's log-probabilities and entropies.
func checkGradsOf(t *testing.T, m *Model, a *Adapter, batch []Example, grad []float32, idx []int, refLoss func(lp, ent [][]float64) float64) {
	t.Helper()
	var params []float64
	if a == nil {
		params = toF64(m.w.flat)
	} else {
		params = toF64(a.flat)
	}
	loss := func() float64 {
		if a == nil {
			return refLoss(refScores(m, params, batch))
		}
		return refLoss(refScores(m, refMerge(m, a, params), batch))
	}
	compareFD(t, params, loss, grad, idx, func(i int) string { return paramName(m, a, i) })
}

// compareFD compares grad with central differences of loss in params
// (which loss reads) at the indices idx, naming a parameter by name.
func compareFD(t *testing.T, params []float64, loss func() float64, grad []float32, idx []int, name func(i int) string) {
	t.Helper()
	const eps = 1e-5
	worst := 0.0
	for _, i := range idx {
		orig := params[i]
		params[i] = orig + eps
		lp := loss()
		params[i] = orig - eps
		lm := loss()
		params[i] = orig
		fd := (lp - lm) / (2 * eps)
		g := float64(grad[i])
		err := math.Abs(fd-g) / math.Max(math.Max(math.Abs(fd), math.Abs(g)), 1e-3)
		worst = math.Max(worst, err)
		if err > 1e-3 {
			t.Errorf("%s (index %d): analytic %.7g, finite difference %.7g", name(i), i, g, fd)
		}
	}
	t.Logf("worst relative error over %d parameters: %.2g", len(idx), worst)
}

func paramName(m *Model, a *Adapter, i int) string {
	if a != nil {
		off := 0
		for _, mod := range a.mods {
			if i < off+len(mod.a) {
				return mod.spec.path + ".lora_A"
			}
			off += len(mod.a)
			if i < off+len(mod.b) {
				return mod.spec.path + ".lora_B"
			}
			off += len(mod.b)
		}
	}
	for _, p := range m.lo.params {
		if i >= p.off && i < p.off+p.size {
			return p.name
		}
	}
	return "?"
}

// weightedGradients returns a trainer of m (and a, when not nil) that has
// computed the gradients of weightedLoss on batch.
func weightedGradients(t *testing.T, m *Model, a *Adapter, batch []Example) *Trainer {
	t.Helper()
	tr, err := NewTrainer(m, a, TrainConfig{LR: 1e-3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.gradients(context.Background(), batch, LossFunc(weightedLoss).entropyFree()); err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestGradientsFull(t *testing.T) {
	m := randomModel(t, smallConfig(), 1)
	batch := testBatch(t, m, 5, 1)
	tr := weightedGradients(t, m, nil, batch)
	// Every parameter tensor, a few entries each.
	rng := rand.New(rand.NewPCG(3, 3))
	var idx []int
	for _, p := range m.lo.params {
		for k := 0; k < 3; k++ {
			idx = append(idx, p.off+rng.IntN(p.size))
		}
	}
	checkGrads(t, m, nil, batch, tr.grad, idx)
}

func TestGradientsLoRA(t *testing.T) {
	m := randomModel(t, smallConfig(), 2)
	a := randomAdapter(t, m, 8)
	batch := testBatch(t, m, 5, 2)
	tr := weightedGradients(t, m, a, batch)
	rng := rand.New(rand.NewPCG(3, 3))
	var idx []int
	for k := 0; k < 60; k++ {
		idx = append(idx, rng.IntN(len(a.flat)))
	}
	checkGrads(t, m, a, batch, tr.grad, idx)
}
