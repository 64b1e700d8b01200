package embedded_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/trainers/embedded"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

func embeddedModel(t testing.TB) *tiny.Model {
	t.Helper()
	m, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sampleBatch samples 8 completions of n training prompts from the model
// (with adapter a, nil for the base) as the rollout stage would, and
// scores them as the exact-answer reward does.
func sampleBatch(t testing.TB, m *tiny.Model, a *tiny.Adapter, n int, seed uint64) embedded.Batch {
	t.Helper()
	return sampleBatchAt(t, m, a, n, seed, 1)
}

// sampleBatchAt is sampleBatch at another temperature.
func sampleBatchAt(t testing.TB, m *tiny.Model, a *tiny.Adapter, n int, seed uint64, temperature float64) embedded.Batch {
	t.Helper()
	prompts := arithPrompts(n)
	reqs := make([]policy.Request, n)
	for i, p := range prompts {
		reqs[i] = policy.PromptRequest(p, seed)
	}
	s := policy.Sampling{N: 8, Temperature: temperature, MaxTokens: 5, Logprobs: true}
	sampler, err := s.JSON()
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.Generate(context.Background(), a, reqs, s)
	if err != nil {
		t.Fatal(err)
	}
	var b embedded.Batch
	b.Prompts = prompts
	for i, samples := range out {
		for j, smp := range samples {
			tr := policy.TrajectoryRow(smp, reqs[i], j, policy.RowParams{Iteration: 1}, m.Version(), sampler)
			b.Trajectories = append(b.Trajectories, tr)
			v := 0.0
			if tr.FinishReason == policy.FinishStop && tr.Completion == prompts[i].Answer {
				v = 1
			}
			b.Rewards = append(b.Rewards, tables.Reward{PromptID: tr.PromptID, SampleIndex: tr.SampleIndex, Total: v,
				Components: map[string]float64{"correct": v}, Status: tables.StatusOK})
		}
	}
	return b
}

func newTrainer(t testing.TB, m *tiny.Model, o embedded.Options) *embedded.Trainer {
	t.Helper()
	tr, err := embedded.New(m, o)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		name string
		o    embedded.Options
		key  string // "" when valid
	}{
		{"defaults", embedded.Options{}, ""},
		{"clip off and clip-higher", embedded.Options{ClipNorm: -1, EpsHigh: 0.28, Beta: 0.04, Aggregation: grpo.SequenceMean}, ""},
		{"negative lr", embedded.Options{LR: -1}, "lr"},
		{"weight decay", embedded.Options{WeightDecay: -0.1}, "weight_decay"},
		{"epochs", embedded.Options{Epochs: -1}, "epochs"},
		{"minibatches", embedded.Options{Minibatches: -2}, "minibatches"},
		{"eps low", embedded.Options{EpsLow: 1.5}, "eps_low"},
		{"eps low NaN", embedded.Options{EpsLow: math.NaN()}, "eps_low"},
		{"beta", embedded.Options{Beta: -0.01}, "beta"},
		{"dual clip 3", embedded.Options{DualClip: 3}, ""},
		{"dual clip at 1", embedded.Options{DualClip: 1}, "dual_clip"},
		{"dual clip negative", embedded.Options{DualClip: -3}, "dual_clip"},
		{"aggregation", embedded.Options{Aggregation: "batch"}, "aggregation"},
		{"rank", embedded.Options{LoRA: embedded.LoRAOptions{Rank: -8}}, "lora.rank"},
		{"full fine-tuning", embedded.Options{LoRA: embedded.LoRAOptions{None: true}, MaxShardSize: 1 << 20}, ""},
		{"max shard size negative", embedded.Options{LoRA: embedded.LoRAOptions{None: true}, MaxShardSize: -1}, "max_shard_size"},
		{"max shard size with LoRA", embedded.Options{MaxShardSize: 1 << 20}, "max_shard_size"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.EnsureDefaults()
			err := o.Validate()
			switch {
			case tc.key == "" && err != nil:
				t.Fatalf("valid options rejected: %v", err)
			case tc.key != "" && (!errors.Is(err, embedded.ErrOptions) || !strings.Contains(err.Error(), tc.key+":")):
				t.Fatalf("error %v, want ErrOptions naming %q", err, tc.key)
			}
		})
	}
}

func TestVersionDigestsOptionsAndModel(t *testing.T) {
	m := embeddedModel(t)
	other, err := tiny.New(tiny.DefaultConfig(), 3)
	if err != nil {
		t.Fatal(err)
	}
	version := func(o embedded.Options, m *tiny.Model) string {
		t.Helper()
		v, err := o.Version(m)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	base := version(embedded.Options{}, m)
	if got := version(embedded.Options{LR: embedded.DefaultLR, ClipNorm: 1}, m); got != base {
		t.Errorf("explicit defaults give version %s, the zero options %s", got, base)
	}
	for name, v := range map[string]string{
		"lr":         version(embedded.Options{LR: 3e-3}, m),
		"beta":       version(embedded.Options{Beta: 0.01}, m),
		"lora seed":  version(embedded.Options{LoRA: embedded.LoRAOptions{Seed: 2}}, m),
		"lora none":  version(embedded.Options{LoRA: embedded.LoRAOptions{None: true}}, m),
		"base model": version(embedded.Options{}, other),
	} {
		if v == base {
			t.Errorf("changing the %s keeps the version %s", name, v)
		}
	}
	if !strings.HasPrefix(base, embedded.CodeVersion+"-") {
		t.Errorf("version %s does not start with the code version", base)
	}
	_, err = embedded.Options{EpsLow: math.NaN()}.Version(m)
	if want := "train task version: encode the options: json: unsupported value: NaN"; err == nil || err.Error() != want {
		t.Errorf("version of a NaN eps_low: error %v, want %q", err, want)
	}
}

// TestUpdateMasks: failed, unscored and token-less samples and groups of
// equal rewards are left out with a reason; a failed sample does not
// enter its group's statistics.
func TestUpdateMasks(t *testing.T) {
	m := embeddedModel(t)
	b := sampleBatch(t, m, nil, 16, 3)
	// Prompt a00000's group: make rewards 1,0,1,0,... then fail sample 0
	// (reward 1) with a timeout, drop sample 1's reward and sample 2's
	// token ids.
	for i := range b.Rewards[:8] {
		b.Rewards[i].Total = float64((i + 1) % 2)
	}
	b.Trajectories[0].Status = tables.StatusTimeout
	b.Trajectories[2].TokenIDs, b.Trajectories[2].Logprobs = nil, nil
	b.Rewards = append(b.Rewards[:1], b.Rewards[2:]...)
	res, err := newTrainer(t, m, embedded.Options{}).Update(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	adv := res.Advantages
	if len(adv) != len(b.Trajectories) {
		t.Fatalf("%d advantage rows for %d trajectories", len(adv), len(b.Trajectories))
	}
	wantReasons := map[int]string{0: advantages.ReasonTrajectory + tables.StatusTimeout, 1: advantages.ReasonNoReward, 2: advantages.ReasonNoTokens}
	for i, want := range wantReasons {
		if !adv[i].Mask || adv[i].Reason != want {
			t.Errorf("sample %d: mask %v reason %q, want %q", i, adv[i].Mask, adv[i].Reason, want)
		}
	}
	// The group's statistics are over samples 2..7: rewards 1,0,1,0,1,0.
	if a := adv[3]; a.Mask || a.GroupSize != 6 || a.GroupMean != 0.5 {
		t.Errorf("sample 3: %+v, want a group of 6 with mean 0.5", a)
	}
	met := res.Metrics
	zero := 0
	for _, a := range adv {
		if a.Reason == advantages.ReasonZeroStd {
			zero++
		}
	}
	if zero == 0 || met.MaskReasons[advantages.ReasonZeroStd] != zero {
		t.Errorf("%d samples masked for zero variance, metrics say %d", zero, met.MaskReasons[advantages.ReasonZeroStd])
	}
	if met.Samples != 128 || met.Used != 128-met.Masked || met.Errored != 2 || met.Groups != 16 {
		t.Errorf("metrics %+v: want 128 samples, used = samples - masked, 2 errored, 16 groups", met)
	}
	if met.OptimizerSteps != 1 || len(met.Steps) != 1 || met.TrainTokens == 0 || met.Steps[0].RatioDev > 1e-3 {
		t.Errorf("metrics %+v: want one on-policy step (ratio ≈ 1)", met)
	}
}

func TestUpdateRejectsInconsistentBatches(t *testing.T) {
	m := embeddedModel(t)
	cases := []struct {
		name   string
		mutate func(*embedded.Batch)
		want   string
	}{
		{"reward of an unknown sample", func(b *embedded.Batch) { b.Rewards[0].SampleIndex = 99 }, "which the trajectories do not hold"},
		{"twice the same reward", func(b *embedded.Batch) { b.Rewards[1] = b.Rewards[0] }, "twice"},
		{"token of another vocabulary", func(b *embedded.Batch) { b.Trajectories[5].TokenIDs[0] = 40 }, "token 40 at 1"},
		{"negative token id", func(b *embedded.Batch) { b.Trajectories[5].TokenIDs[0] = -1 }, "token -1 at 1"},
		{"EOS before the end", func(b *embedded.Batch) {
			tr := &b.Trajectories[5]
			tr.TokenIDs = append([]int32{tiny.EOS}, tr.TokenIDs...)
			tr.Logprobs = append([]float32{-1}, tr.Logprobs...)
		}, "token 2 at 1 is not a completion token"},
		{"logprobs of another length", func(b *embedded.Batch) { b.Trajectories[5].Logprobs = b.Trajectories[5].Logprobs[:0] }, "logprobs for"},
		{"prompt missing", func(b *embedded.Batch) { b.Prompts = b.Prompts[1:] }, "no row in the prompts table"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := sampleBatch(t, m, nil, 2, 1)
			// Give every group two rewards so no group is dropped.
			b.Rewards[0].Total, b.Rewards[8].Total = 1, 1
			b.Rewards[1].Total, b.Rewards[9].Total = 0, 0
			tc.mutate(&b)
			_, err := newTrainer(t, m, embedded.Options{}).Update(context.Background(), b)
			if !errors.Is(err, embedded.ErrBatch) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrBatch saying %q", err, tc.want)
			}
		})
	}
}

// The samplers draw from the whole distribution, PAD and BOS included
// (the embedded engine as vLLM does): at a high temperature some
// completions hold them, and the trainer takes them like any other token
// rather than failing the run's train task.
func TestUpdateTrainsOnSampledPADAndBOS(t *testing.T) {
	m := embeddedModel(t)
	b := sampleBatchAt(t, m, nil, 8, 1, 4)
	special := map[int32]int{}
	tokens := 0
	for _, tr := range b.Trajectories {
		tokens += len(tr.TokenIDs)
		for _, id := range tr.TokenIDs {
			if id == tiny.PAD || id == tiny.BOS {
				special[id]++
			}
		}
	}
	if special[tiny.PAD] == 0 || special[tiny.BOS] == 0 {
		t.Fatalf("no PAD or BOS in %d tokens sampled at temperature 4 (%v): pick another seed", tokens, special)
	}
	res, err := newTrainer(t, m, embedded.Options{KeepZeroStd: true}).Update(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if met := res.Metrics; met.Masked != 0 || met.TrainTokens != tokens {
		t.Errorf("trained on %d of %d tokens with %d samples masked; want every token of every sample (PAD %d, BOS %d of them)",
			met.TrainTokens, tokens, met.Masked, special[tiny.PAD], special[tiny.BOS])
	}
}

// TestSaveLoadContinuesExactly: two updates in one trainer equal one
// update, Save, Load, and the second update — byte for byte. Loading the
// adapter without its optimizer state does not.
func TestSaveLoadContinuesExactly(t *testing.T) {
	m := embeddedModel(t)
	b1, b2 := sampleBatch(t, m, nil, 8, 1), sampleBatch(t, m, nil, 8, 2)
	o := embedded.Options{}
	want := trainSaved(t, m, o, "", b1, b2)
	mid := trainSaved(t, m, o, "", b1)
	got := trainSaved(t, m, o, mid, b2)
	for _, f := range []string{"adapter_config.json", "adapter_model.safetensors", embedded.OptimizerFile, embedded.StateFile} {
		if !bytes.Equal(readFile(t, want, f), readFile(t, got, f)) {
			t.Errorf("%s differs between the straight and the resumed trainer", f)
		}
	}
	if err := os.Remove(filepath.Join(mid, embedded.OptimizerFile)); err != nil {
		t.Fatal(err)
	}
	if fresh := trainSaved(t, m, o, mid, b2); bytes.Equal(readFile(t, want, "adapter_model.safetensors"), readFile(t, fresh, "adapter_model.safetensors")) {
		t.Error("fresh AdamW moments trained the same adapter: the optimizer state is not doing anything")
	}
}

// trainSaved updates a trainer on each batch in turn, a new one (from
// "") or one loaded from the checkpoint directory from, and saves it
// into a new directory, which it returns.
func trainSaved(t testing.TB, m *tiny.Model, o embedded.Options, from string, batches ...embedded.Batch) string {
	t.Helper()
	tr, err := embedded.New(m, o)
	if from != "" {
		tr, err = embedded.Load(m, o, from)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if _, err := tr.Update(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "checkpoint")
	if err := tr.Save(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readFile(t testing.TB, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLoadRejectsAnotherBase: an adapter trained on one base model does
// not continue on another.
func TestLoadRejectsAnotherBase(t *testing.T) {
	m := embeddedModel(t)
	dir := filepath.Join(t.TempDir(), "a")
	if err := newTrainer(t, m, embedded.Options{}).Save(dir); err != nil {
		t.Fatal(err)
	}
	other, err := tiny.New(tiny.DefaultConfig(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := embedded.Load(other, embedded.Options{}, dir); err == nil || !strings.Contains(err.Error(), "was trained on") {
		t.Fatalf("error %v, want one naming both base models", err)
	}
}

// TestEmptyBatchTakesNoStep: when every group has equal rewards there is
// nothing to learn; the update takes no step and leaves the adapter as
// it was.
func TestEmptyBatchTakesNoStep(t *testing.T) {
	m := embeddedModel(t)
	b := sampleBatch(t, m, nil, 4, 1)
	for i := range b.Rewards {
		b.Rewards[i].Total = 1
	}
	tr := newTrainer(t, m, embedded.Options{})
	res, err := tr.Update(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if met := res.Metrics; met.Used != 0 || met.OptimizerSteps != 0 || met.Updates != 1 || met.FracRewardZeroStd == nil || *met.FracRewardZeroStd != 1 || len(met.Steps) != 0 {
		t.Fatalf("metrics %+v, want no sample used, no step, one update", met)
	}
}

// At β = 0 (the default) the KL to the base model is not computed: the
// metrics say so with null, never with a measured-looking 0; at β > 0 it
// is the steps' mean.
func TestKLIsNullWhenNotComputed(t *testing.T) {
	m := embeddedModel(t)
	for _, beta := range []float64{0, 0.04} {
		b := sampleBatch(t, m, nil, 8, 3)
		for i := range b.Rewards {
			b.Rewards[i].Total = float64(i % 2)
		}
		res, err := newTrainer(t, m, embedded.Options{Beta: beta}).Update(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		met := res.Metrics
		raw, err := json.Marshal(met)
		if err != nil {
			t.Fatal(err)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil {
			t.Fatal(err)
		}
		if len(met.Steps) == 0 {
			t.Fatalf("β %v: no optimizer step", beta)
		}
		if beta == 0 {
			if met.KL != nil || string(fields["kl"]) != "null" || met.Steps[0].KL != nil {
				t.Errorf("β 0: kl %s (steps %v), want null", fields["kl"], met.Steps[0].KL)
			}
			continue
		}
		var sum float64
		for _, s := range met.Steps {
			sum += *s.KL
		}
		if met.KL == nil || *met.KL != sum/float64(len(met.Steps)) || *met.KL < 0 {
			t.Errorf("β %v: kl %v, want the mean of the steps' %v", beta, met.KL, sum/float64(len(met.Steps)))
		}
	}
}
