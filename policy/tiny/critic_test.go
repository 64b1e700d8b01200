package tiny

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/policy/safetensors"
)

// randomCritic is a critic of m whose factors and head are all random,
// so that every gradient is exercised.
func randomCritic(t *testing.T, m *Model, seed uint64) *Critic {
	t.Helper()
	c, err := m.NewCritic(LoRAConfig{Rank: 3, Alpha: 6, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 11))
	for i := range c.flat {
		c.flat[i] = float32(0.3 * rng.NormFloat64())
	}
	c.ad.changed()
	return c
}

// weightedValueLoss is Σ c·value with weightedSum's weights.
func weightedValueLoss(values, grad [][]float64) (float64, error) {
	return weightedSum(values, func(i, j int, c float32) { grad[i][j] = float64(c) }), nil
}

// TestGradientsCritic checks the gradient of a value loss with respect
// to the critic's factors and head (backwardValues: head.weight·dV enters
// the backward pass at the final norm's output) against central
// differences of the float64 reference.
func TestGradientsCritic(t *testing.T) {
	m := randomModel(t, smallConfig(), 5)
	c := randomCritic(t, m, 6)
	batch := testBatch(t, m, 5, 3)
	tr, err := NewCriticTrainer(m, c, TrainConfig{LR: 1e-3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.valueGradients(context.Background(), batch, weightedValueLoss); err != nil {
		t.Fatal(err)
	}
	n := len(c.ad.flat)
	params := toF64(c.flat)
	loss := func() float64 {
		return refWeightedLoss(refValues(m, refMerge(m, c.ad, params[:n]), params[n:], batch))
	}
	rng := rand.New(rand.NewPCG(3, 3))
	var idx []int
	for k := 0; k < 60; k++ {
		idx = append(idx, rng.IntN(n))
	}
	for k := 0; k < 6; k++ {
		idx = append(idx, n+rng.IntN(m.cfg.Dim))
	}
	idx = append(idx, len(c.flat)-1) // the bias
	compareFD(t, params, loss, tr.grad, idx, func(i int) string { return criticParamName(m, c, i) })
}

func criticParamName(m *Model, c *Critic, i int) string {
	n := len(c.ad.flat)
	switch {
	case i == len(c.flat)-1:
		return ValueHeadBias
	case i >= n:
		return ValueHeadWeight
	}
	return paramName(m, c.ad, i)
}

// TestCriticValues checks Values against the float64 reference, and
// that a fresh critic values everything at exactly 0.
func TestCriticValues(t *testing.T) {
	m := randomModel(t, smallConfig(), 7)
	batch := testBatch(t, m, 7, 4)
	fresh, err := m.NewCritic(LoRAConfig{Rank: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	v, err := m.Values(context.Background(), fresh, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, row := range v {
		if slices.ContainsFunc(row, func(x float64) bool { return x != 0 }) {
			t.Fatalf("a fresh critic values example %d at %v, want every value 0", i, row)
		}
	}
	c := randomCritic(t, m, 8)
	got, err := m.Values(context.Background(), c, batch)
	if err != nil {
		t.Fatal(err)
	}
	n := len(c.ad.flat)
	params := toF64(c.flat)
	want := refValues(m, refMerge(m, c.ad, params[:n]), params[n:], batch)
	for i := range want {
		if len(got[i]) != len(batch[i].Completion) {
			t.Fatalf("example %d: %d values for %d completion tokens", i, len(got[i]), len(batch[i].Completion))
		}
		for j := range want[i] {
			if d := math.Abs(got[i][j] - want[i][j]); d > 1e-4 {
				t.Errorf("example %d token %d: value %.7g, reference %.7g", i, j, got[i][j], want[i][j])
			}
		}
	}
}

// TestCriticSaveLoad checks that a saved critic loads back to the same
// values, that its files are the PEFT adapter and the head, and that a
// step moves the values towards lower loss.
func TestCriticSaveLoad(t *testing.T) {
	m := randomModel(t, smallConfig(), 9)
	c := randomCritic(t, m, 10)
	dir := t.TempDir()
	if err := c.Save(dir); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.ReadFile(filepath.Join(dir, ValueHeadFile))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Names(); !slices.Equal(got, []string{ValueHeadBias, ValueHeadWeight}) {
		t.Fatalf("%s holds %v", ValueHeadFile, got)
	}
	if !slices.Equal(f.Tensors[ValueHeadWeight].Shape, []int{1, m.cfg.Dim}) || !slices.Equal(f.Tensors[ValueHeadBias].Shape, []int{1}) {
		t.Fatalf("head shapes %v, %v", f.Tensors[ValueHeadWeight].Shape, f.Tensors[ValueHeadBias].Shape)
	}
	back, err := m.LoadCritic(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.flat, c.flat) {
		t.Fatal("the loaded critic's parameters differ from the saved ones")
	}
	// A head of the wrong width names the file and the tensor.
	f.Tensors[ValueHeadWeight] = safetensors.FromFloat32([]int{1, 3}, []float32{1, 2, 3})
	if err := safetensors.WriteFile(filepath.Join(dir, ValueHeadFile), f); err != nil {
		t.Fatal(err)
	}
	_, err = m.LoadCritic(dir)
	want := "load critic " + filepath.Join(dir, ValueHeadFile) + `: tensor "v_head.weight" has shape [1 3], the base model needs [1 16]`
	if err == nil || err.Error() != want {
		t.Fatalf("load with a bad head: %v\nwant %s", err, want)
	}
	if err := os.Remove(filepath.Join(dir, ValueHeadFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.LoadCritic(dir); err == nil {
		t.Fatal("a critic without its value head loaded")
	}
}

// TestCriticStepLowersLoss takes AdamW steps on ½·Σ(V − 1)² and checks
// that the loss falls and the trainer refuses the policy's Step.
func TestCriticStepLowersLoss(t *testing.T) {
	m := randomModel(t, smallConfig(), 12)
	c, err := m.NewCritic(LoRAConfig{Rank: 2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewCriticTrainer(m, c, TrainConfig{LR: 1e-2})
	if err != nil {
		t.Fatal(err)
	}
	batch := testBatch(t, m, 6, 5)
	half := func(values, grad [][]float64) (float64, error) {
		var l float64
		for i, row := range values {
			for j, v := range row {
				l += 0.5 * (v - 1) * (v - 1)
				grad[i][j] = v - 1
			}
		}
		return l, nil
	}
	var losses []float64
	for range 5 {
		st, err := tr.StepValues(context.Background(), batch, half)
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, st.Loss)
	}
	if !(losses[4] < losses[0]) {
		t.Fatalf("value losses over 5 steps %v: want the last below the first", losses)
	}
	if _, err := tr.Step(context.Background(), batch, NLL); err == nil || err.Error() != "train step: a critic's trainer steps with StepValues" {
		t.Fatalf("Step on a critic's trainer: %v", err)
	}
}
