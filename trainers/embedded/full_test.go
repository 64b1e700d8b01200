package embedded_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/internal/dirtest"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/safetensors"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/trainers/embedded"
)

// fullOptions is full fine-tuning with the weights in shards of at most
// 256 KiB, so that the tiny model's 0.8 MB are several shards.
func fullOptions() embedded.Options {
	return embedded.Options{LoRA: embedded.LoRAOptions{None: true}, MaxShardSize: 256 << 10}
}

// Full fine-tuning trains every weight of the model, writes a sharded
// Hugging Face model directory with the optimizer state beside it, and a
// trainer loaded from it continues bit for bit, as with an adapter.
func TestFullSaveLoadContinuesExactly(t *testing.T) {
	m := embeddedModel(t)
	b1, b2 := sampleBatch(t, m, nil, 4, 1), sampleBatch(t, m, nil, 4, 2)
	o := fullOptions()
	if tr := newTrainer(t, m, o); tr.Adapter() != nil || tr.Model() == nil {
		t.Fatal("a full fine-tune trains an adapter")
	}
	want := trainSaved(t, m, o, "", b1, b2)
	wantFiles := []string{"config.json", "generation_config.json", "model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
		"model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors", "model.safetensors.index.json",
		embedded.OptimizerFile, "tokenizer.json", "tokenizer_config.json", embedded.StateFile}
	if got := dirtest.Names(t, want); !slices.Equal(got, wantFiles) {
		t.Fatalf("files %q, want %q", got, wantFiles)
	}
	if k, err := policy.CheckpointKind(want); k != policy.KindWeights || err != nil {
		t.Fatalf("CheckpointKind = %v, %v", k, err)
	}
	if err := policy.CheckShards(want); err != nil {
		t.Fatal(err)
	}
	// Every tensor of the model moved from the base.
	base := filepath.Join(t.TempDir(), "base")
	if err := m.ExportHF(base); err != nil {
		t.Fatal(err)
	}
	before, err := safetensors.ReadModel(base)
	if err != nil {
		t.Fatal(err)
	}
	after, err := safetensors.ReadModel(want)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range before.Names() {
		if bytes.Equal(before.Tensors[name].Data, after.Tensors[name].Data) {
			t.Errorf("tensor %s did not change", name)
		}
	}
	if len(after.Tensors) != len(before.Tensors) {
		t.Errorf("%d tensors saved, the model has %d", len(after.Tensors), len(before.Tensors))
	}
	got := trainSaved(t, m, o, trainSaved(t, m, o, "", b1), b2)
	for _, f := range wantFiles {
		if !bytes.Equal(readFile(t, want, f), readFile(t, got, f)) {
			t.Errorf("%s differs between the straight and the resumed trainer", f)
		}
	}
}

// Below max_shard_size the weights are one model.safetensors, indexed all
// the same: vLLM loads every *.safetensors of a directory without an
// index, optimizer.safetensors included.
func TestFullUnshardedIsIndexed(t *testing.T) {
	m := embeddedModel(t)
	dir := filepath.Join(t.TempDir(), "w")
	if err := newTrainer(t, m, embedded.Options{LoRA: embedded.LoRAOptions{None: true}}).Save(dir); err != nil {
		t.Fatal(err)
	}
	want := []string{"config.json", "generation_config.json", "model.safetensors", "model.safetensors.index.json",
		embedded.OptimizerFile, "tokenizer.json", "tokenizer_config.json", embedded.StateFile}
	if got := dirtest.Names(t, dir); !slices.Equal(got, want) {
		t.Fatalf("files %q, want %q", got, want)
	}
	if err := policy.CheckShards(dir); err != nil {
		t.Fatal(err)
	}
	ix, err := safetensors.ReadIndex(filepath.Join(dir, safetensors.IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(ix.WeightMap) != 3*9+3 || ix.Metadata.TotalSize != 4*int64(m.NumParams()) {
		t.Fatalf("index of %d tensors, %d bytes; want 30 tensors, %d bytes", len(ix.WeightMap), ix.Metadata.TotalSize, 4*m.NumParams())
	}
}

// A trainer continues only the kind of checkpoint it trains.
func TestLoadRejectsTheOtherKind(t *testing.T) {
	m := embeddedModel(t)
	adapter, weights := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "w")
	if err := newTrainer(t, m, embedded.Options{}).Save(adapter); err != nil {
		t.Fatal(err)
	}
	if err := newTrainer(t, m, fullOptions()).Save(weights); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    embedded.Options
		dir  string
		want string
	}{
		{"weights to a LoRA trainer", embedded.Options{}, weights,
			weights + " holds full weights, but the trainer trains a LoRA adapter: the policy input is not the kind of checkpoint the trainer continues (set trainer: {lora: none} to continue full fine-tuning)"},
		{"an adapter to a full fine-tune", fullOptions(), adapter,
			adapter + " is a PEFT adapter, but trainer.lora is none (full fine-tuning): the policy input is not the kind of checkpoint the trainer continues (start full fine-tuning from the base model, or remove lora: none to train the adapter)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := embedded.Load(m, tc.o, tc.dir)
			if err == nil || err.Error() != tc.want || !errors.Is(err, embedded.ErrCheckpointKind) {
				t.Fatalf("err = %v\nwant %q", err, tc.want)
			}
		})
	}
	// Weights of another shape are refused naming both shapes.
	small, err := tiny.New(tiny.Config{Name: "tiny-arith", Vocab: m.Config().Vocab, Dim: 32, Heads: 2, Layers: 1, Hidden: 64, Context: 32}, 1)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other")
	if err := small.ExportHF(other); err != nil {
		t.Fatal(err)
	}
	_, err = embedded.Load(m, fullOptions(), other)
	want := "load weights " + other + ": the model is dim 32, 2 heads of 16, 1 layers, MLP 64, context 32, 16 tokens, not dim 64, 4 heads of 32, 3 layers, MLP 176, context 32, 16 tokens of tiny-arith: weights do not match the policy's model"
	if err == nil || err.Error() != want || !errors.Is(err, policy.ErrWeightsShape) {
		t.Fatalf("err = %v\nwant %q", err, want)
	}
}

// The loop with full fine-tuning: each iteration's generate stage loads
// the previous iteration's weights into the embedded policy through
// policy.Adapters (rows carry "<base>+weights-<12 hex>"), and a run
// stopped and resumed ends with the same bytes as one that was not.
func TestFullLoopResumesExactly(t *testing.T) {
	st, ref, want := resumedLikeStraight(t, fullOptions(), 2, 1)
	m := embeddedModel(t)
	for _, f := range []string{"config.json", "model.safetensors.index.json", "model-00004-of-00004.safetensors", embedded.OptimizerFile} {
		if p := "iterations/000002/adapter/" + f; want[p] == "" {
			t.Fatalf("no %s in the final checkpoint", p)
		}
	}
	b := standintest.Read(t, st, ref, "iterations/000002/trajectories.parquet")
	rows, err := tables.Read(bytes.NewReader(b), int64(len(b)), "trajectories.parquet", tables.Trajectories)
	if err != nil {
		t.Fatal(err)
	}
	versions := map[string]bool{}
	for _, row := range rows {
		versions[row.PolicyVersion] = true
	}
	if len(versions) != 1 {
		t.Fatalf("iteration 2 sampled from %d versions: %v", len(versions), versions)
	}
	for v := range versions {
		if prefix := m.Version() + "+weights-"; !strings.HasPrefix(v, prefix) || len(v) != len(prefix)+12 {
			t.Fatalf("iteration 2's policy version %q, want %s<12 hex>", v, prefix)
		}
	}
}
