package tiny

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/safetensors"
)

func newTrainer(t testing.TB, m *Model, a *Adapter, cfg TrainConfig) *Trainer {
	t.Helper()
	tr, err := NewTrainer(m, a, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestParallelEqualsSerial: two workers give the serial gradients bit for
// bit, because shards are fixed and summed in order.
func TestParallelEqualsSerial(t *testing.T) {
	for _, lora := range []bool{false, true} {
		var grads [2][]float32
		for k, workers := range []int{1, 2} {
			m, a := shardedModel(t, lora)
			tr := newTrainer(t, m, a, TrainConfig{LR: 1e-3, Shards: 3, Workers: workers})
			if _, err := tr.gradients(context.Background(), testBatch(t, m, 11, 4), LossFunc(weightedLoss).entropyFree()); err != nil {
				t.Fatal(err)
			}
			grads[k] = tr.grad
		}
		if !equalBits(grads[0], grads[1]) {
			t.Errorf("lora %v: gradients with 2 workers differ from 1 worker", lora)
		}
	}
}

// shardedModel is the random model of the sharding tests, with, for
// lora, an adapter whose factors are all non-zero.
func shardedModel(t *testing.T, lora bool) (*Model, *Adapter) {
	m := randomModel(t, smallConfig(), 3)
	if !lora {
		return m, nil
	}
	a, err := m.NewAdapter(LoRAConfig{Rank: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range a.flat {
		a.flat[i] = float32(i%7) * 0.01
	}
	return m, a
}

// TestResume: 2 steps, save, a fresh trainer loads the state, 2 more steps
// equal 4 steps straight, bit for bit.
func TestResume(t *testing.T) {
	ctx := context.Background()
	for _, lora := range []bool{false, true} {
		setup := func() (*Model, *Adapter, *Trainer) {
			m := randomModel(t, smallConfig(), 4)
			var a *Adapter
			if lora {
				a, _ = m.NewAdapter(LoRAConfig{Rank: 2, Seed: 1})
			}
			return m, a, newTrainer(t, m, a, TrainConfig{LR: 1e-2, WeightDecay: 0.1, ClipNorm: 0.5})
		}
		batches := [][]Example{}
		m0, a0, tr0 := setup()
		for i := 0; i < 4; i++ {
			batches = append(batches, testBatch(t, m0, 6, uint64(10+i)))
		}
		for _, b := range batches {
			if _, err := tr0.Step(ctx, b, NLL); err != nil {
				t.Fatal(err)
			}
		}
		_, _, tr1 := setup()
		for _, b := range batches[:2] {
			tr1.Step(ctx, b, NLL)
		}
		path := filepath.Join(t.TempDir(), "opt.safetensors")
		if err := tr1.SaveState(path); err != nil {
			t.Fatal(err)
		}
		m2, a2, tr2 := setup()
		if err := tr2.LoadState(path); err != nil {
			t.Fatal(err)
		}
		var st StepStats
		for _, b := range batches[2:] {
			st, _ = tr2.Step(ctx, b, NLL)
		}
		if st.Step != 4 {
			t.Errorf("resumed trainer at step %d", st.Step)
		}
		if lora {
			if !equalBits(a0.flat, a2.flat) {
				t.Error("lora: resumed adapter differs")
			}
		} else if !equalBits(m0.w.flat, m2.w.flat) || m0.Version() != m2.Version() {
			t.Error("full: resumed weights differ")
		}
		if lora {
			// A full trainer refuses a LoRA state.
			m3 := randomModel(t, smallConfig(), 4)
			if err := newTrainer(t, m3, nil, TrainConfig{LR: 1}).LoadState(path); err == nil || !strings.Contains(err.Error(), "it trains") {
				t.Errorf("a full trainer loaded a LoRA state: %v", err)
			}
		}
	}
}

// A learning rate JSON cannot hold fails SaveState, and no state file is
// written whose train_config is empty.
func TestSaveStateNaNLR(t *testing.T) {
	m := randomModel(t, smallConfig(), 4)
	tr := newTrainer(t, m, nil, TrainConfig{LR: 1e-2})
	tr.SetLR(math.NaN())
	path := filepath.Join(t.TempDir(), "opt.safetensors")
	err := tr.SaveState(path)
	if want := "save optimizer state: encode the train config: json: unsupported value: NaN"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a state file was written: %v", err)
	}
}

func TestTrainingLowersLoss(t *testing.T) {
	ctx := context.Background()
	m := testModel(t)
	batch := testBatch(t, m, 16, 1)
	tr := newTrainer(t, m, nil, TrainConfig{LR: 3e-3})
	first, _ := tr.Step(ctx, batch, NLL)
	var last StepStats
	for i := 0; i < 10; i++ {
		last, _ = tr.Step(ctx, batch, NLL)
	}
	if !(last.Loss < first.Loss*0.8) || first.GradNorm <= 0 || first.Tokens == 0 {
		t.Errorf("loss %g → %g, grad norm %g, %d tokens", first.Loss, last.Loss, first.GradNorm, first.Tokens)
	}
}

func TestAdapters(t *testing.T) {
	ctx := context.Background()
	m := testModel(t)
	batch := testBatch(t, m, 6, 2)
	base, _, _ := m.Score(ctx, nil, batch)

	a, err := m.NewAdapter(LoRAConfig{Name: "fresh", Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if a.Rank() != 8 || a.Scaling() != 2 || len(a.Modules()) != 21 || a.Modules()[0] != "model.layers.0.self_attn.q_proj" {
		t.Errorf("defaults: rank %d scaling %g modules %v", a.Rank(), a.Scaling(), a.Modules())
	}
	fresh, _, _ := m.Score(ctx, a, batch)
	for i := range base {
		if !equalBits(base[i], fresh[i]) {
			t.Fatal("a fresh adapter (B = 0) changes the model")
		}
	}
	tr := newTrainer(t, m, a, TrainConfig{LR: 1e-2})
	for i := 0; i < 3; i++ {
		if _, err := tr.Step(ctx, batch, NLL); err != nil {
			t.Fatal(err)
		}
	}
	trained, _, _ := m.Score(ctx, a, batch)
	if equalBits(trained[0], base[0]) {
		t.Error("training the adapter changed nothing")
	}
	if after, _, _ := m.Score(ctx, nil, batch); !equalBits(after[0], base[0]) {
		t.Error("LoRA training changed the base model")
	}

	dir := filepath.Join(t.TempDir(), "step-3")
	if err := a.Save(dir); err != nil {
		t.Fatal(err)
	}
	cfg, mods, err := safetensors.ReadAdapterDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BaseModelNameOrPath != m.Version() || len(mods) != 21 || mods["model.layers.1.mlp.up_proj"].A.Shape[1] != 64 || mods["model.layers.1.mlp.up_proj"].B.Shape[0] != 176 {
		t.Errorf("adapter dir: %+v, %d modules", cfg, len(mods))
	}

	// Loaded through the policy, it samples like the in-memory adapter.
	p := NewPolicy(m)
	if err := p.LoadAdapter(ctx, "v3", dir); err != nil {
		t.Fatal(err)
	}
	loaded, _ := p.adapter("v3")
	again, _, _ := m.Score(ctx, loaded, batch)
	for i := range trained {
		if !equalBits(trained[i], again[i]) {
			t.Fatal("a saved and loaded adapter scores differently")
		}
	}
	out, err := p.Generate(ctx, []policy.Request{{Prompt: "1+2="}}, policy.Sampling{Adapter: "v3", MaxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	if v := out[0][0].PolicyVersion; v != m.Version()+"+v3" {
		t.Errorf("version %q", v)
	}
	if _, err := p.Generate(ctx, nil, policy.Sampling{Adapter: "nope"}); !errors.Is(err, policy.ErrAdapterNotLoaded) {
		t.Errorf("unknown adapter: %v", err)
	}
	if err := p.UnloadAdapter(ctx, "v3"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Generate(ctx, nil, policy.Sampling{Adapter: "v3"}); !errors.Is(err, policy.ErrAdapterNotLoaded) {
		t.Errorf("unloaded adapter: %v", err)
	}
}

func TestAdapterMismatch(t *testing.T) {
	ctx := context.Background()
	m := testModel(t)
	p := NewPolicy(m)

	// An adapter of a wider model.
	wide := DefaultConfig()
	wide.Dim, wide.Hidden = 96, 128
	other, err := New(wide, 1)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := other.NewAdapter(LoRAConfig{Targets: []string{"up_proj"}})
	dir := filepath.Join(t.TempDir(), "wide")
	if err := a.Save(dir); err != nil {
		t.Fatal(err)
	}
	err = p.LoadAdapter(ctx, "wide", dir)
	want := `tensor "base_model.model.model.layers.0.mlp.up_proj.lora_A.weight" has shape [8 96], the base model needs [8 64]`
	if !errors.Is(err, policy.ErrAdapterShape) || !strings.Contains(err.Error(), want) {
		t.Errorf("wide adapter: %v", err)
	}

	// An adapter of a deeper model names a module this one lacks.
	deep := DefaultConfig()
	deep.Layers = 4
	other, _ = New(deep, 1)
	a, _ = other.NewAdapter(LoRAConfig{Targets: []string{"q_proj"}})
	dir = filepath.Join(t.TempDir(), "deep")
	a.Save(dir)
	err = p.LoadAdapter(ctx, "deep", dir)
	if !errors.Is(err, policy.ErrAdapterShape) || !strings.Contains(err.Error(), `has no module "model.layers.3.self_attn.q_proj"`) {
		t.Errorf("deep adapter: %v", err)
	}
	if _, err := m.NewAdapter(LoRAConfig{Targets: []string{"c_attn"}}); err == nil {
		t.Error("an unknown target module was accepted")
	}
	if err := p.LoadAdapter(ctx, "none", t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("empty dir: %v", err)
	}
}

func TestLossFuncErrors(t *testing.T) {
	m := testModel(t)
	tr := newTrainer(t, m, nil, TrainConfig{LR: 1e-3})
	boom := errors.New("boom")
	_, err := tr.Step(context.Background(), testBatch(t, m, 2, 1), func(_, _, _ [][]float32) (float64, error) { return 0, boom })
	if !errors.Is(err, boom) {
		t.Errorf("loss error: %v", err)
	}
	long := Example{Prompt: make([]int32, 30), Completion: []int32{5, 5, EOS}}
	for i := range long.Prompt {
		long.Prompt[i] = 4
	}
	if _, err := tr.Step(context.Background(), []Example{long}, NLL); err == nil || !strings.Contains(err.Error(), "exceed the context") {
		t.Errorf("too long: %v", err)
	}
	if _, err := NewTrainer(m, nil, TrainConfig{}); err == nil {
		t.Error("lr 0 accepted")
	}
}

// TestReleasedBuffersTrainTheSame: a trainer that takes the buffers a
// released trainer left (full of a larger batch's values) computes the
// same gradient, bit for bit, as one with fresh buffers.
func TestReleasedBuffersTrainTheSame(t *testing.T) {
	ctx := context.Background()
	loss := LossFunc(weightedLoss).entropyFree()
	gradient := func(m *Model, batch []Example) []float32 {
		a, err := m.NewAdapter(LoRAConfig{Rank: 2, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		tr := newTrainer(t, m, a, TrainConfig{LR: 1e-3})
		if _, err := tr.gradients(ctx, batch, loss); err != nil {
			t.Fatal(err)
		}
		g := append([]float32(nil), tr.grad...)
		tr.Release()
		return g
	}
	fresh := randomModel(t, smallConfig(), 3)
	want := gradient(fresh, testBatch(t, fresh, 5, 2))

	reused := randomModel(t, smallConfig(), 3)
	gradient(reused, testBatch(t, reused, 12, 4)) // dirties the buffers it releases
	// sync.Pool may drop a buffer (under -race, a quarter of them): two
	// rounds make a reuse all but certain; either way the bits must hold.
	for round := 0; round < 2; round++ {
		if got := gradient(reused, testBatch(t, reused, 5, 2)); !equalBits(got, want) {
			t.Fatalf("round %d: the gradient on released buffers differs from the one on fresh buffers", round)
		}
	}
}
