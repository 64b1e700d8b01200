package external_test

import (
	"bytes"
	"context"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/safetensors"
	"github.com/rlpipe/rlpipe/trainers/embedded"
	"github.com/rlpipe/rlpipe/trainers/external/torchtest"
)

// The reference script with lora: none fine-tunes every weight of the
// exported tiny-arith and writes a Hugging Face model directory, sharded
// above max_shard_size, that CheckShards accepts, with the export's
// tokenizer bytes and every tensor moved; its first step's loss is the
// LoRA step's from a fresh adapter (zero B: the same policy) and the
// embedded trainer's full step's, with the same gradient norm over every
// weight; and the next iteration resumes from the directory and its
// AdamW state. Three calls in one python process.
func TestReferenceScriptFullFineTuning(t *testing.T) {
	py := torchPython(t)
	m, model := torchtest.Export(t)
	f := torchtest.Batch(t, m, filepath.Join(t.TempDir(), "batch"), 5, 4, 4, 0)
	lora := torchtest.Hparams(model)
	full := maps.Clone(lora)
	full["lora"], full["max_shard_size"] = "none", 300_000
	// The second iteration reads the first's output as the train stage
	// lays out the policy input.
	rs := torchtest.Many(t, py, []torchtest.Spec{{Files: f, Hparams: full, Iteration: 1}, {Files: f, Hparams: lora, Iteration: 1},
		{Files: f, Hparams: full, Resume: 1, Iteration: 2}})
	fr, lr, second := rs[0], rs[1], rs[2]
	if fr.Metrics.Loss != lr.Metrics.Loss || fr.Metrics.TrainTokens != lr.Metrics.TrainTokens || fr.Metrics.TrainTokens != f.Tokens {
		t.Errorf("first step: full fine-tuning's loss %v on %d tokens, want the fresh LoRA step's %v on %d (%d in the batch)",
			fr.Metrics.Loss, fr.Metrics.TrainTokens, lr.Metrics.Loss, lr.Metrics.TrainTokens, f.Tokens)
	}
	// The embedded trainer's full fine-tuning on the same batch: the same
	// loss and gradient norm over every weight.
	et, err := embedded.New(m, embedded.Options{LR: 2e-3, KeepZeroStd: true, LoRA: embedded.LoRAOptions{None: true}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := et.Update(context.Background(), f.Batch)
	if err != nil {
		t.Fatal(err)
	}
	em := res.Metrics
	t.Logf("first full step: loss torch %.9f, Go %.9f; grad norm torch %.6f, Go %.6f", fr.Metrics.Loss, em.Loss, fr.Metrics.GradNorm, em.GradNorm)
	if math.Abs(fr.Metrics.Loss-em.Loss) > 1e-5 || math.Abs(fr.Metrics.GradNorm-em.GradNorm) > 1e-4*math.Max(1, em.GradNorm) {
		t.Errorf("first full step: loss torch %.9f, Go %.9f; gradient norm torch %.9f, Go %.9f", fr.Metrics.Loss, em.Loss, fr.Metrics.GradNorm, em.GradNorm)
	}
	if second.Metrics.OptimizerSteps != 2 || second.Metrics.Updates != 2 {
		t.Errorf("second iteration: %d optimizer steps, %d updates; want 2 and 2 (resumed from the first's AdamW state)",
			second.Metrics.OptimizerSteps, second.Metrics.Updates)
	}
	base, err := safetensors.ReadModel(model)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []torchtest.Result{fr, second} {
		if k, err := policy.CheckpointKind(r.Adapter); err != nil || k != policy.KindWeights {
			t.Fatalf("%s: kind %v, %v; want weights", r.Adapter, k, err)
		}
		if err := policy.CheckShards(r.Adapter); err != nil {
			t.Fatal(err)
		}
		shards, _ := filepath.Glob(filepath.Join(r.Adapter, "model-*-of-*.safetensors"))
		if len(shards) < 2 {
			t.Errorf("%d shards of at most 300,000 bytes for %d parameters in float32, want several", len(shards), 202176)
		}
		for _, name := range []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
			if !bytes.Equal(readBytes(t, filepath.Join(model, name)), readBytes(t, filepath.Join(r.Adapter, name))) {
				t.Errorf("%s differs from the export's", name)
			}
		}
		if _, err := os.Stat(filepath.Join(r.Optimizer, "optimizer.pt")); err != nil {
			t.Errorf("no AdamW state beside the weights: %v", err)
		}
		got, err := safetensors.ReadModel(r.Adapter)
		if err != nil {
			t.Fatal(err)
		}
		names := slices.Sorted(maps.Keys(base.Tensors))
		if g := slices.Sorted(maps.Keys(got.Tensors)); !slices.Equal(g, names) {
			t.Fatalf("tensors %v, want the export's %v", g, names)
		}
		for _, n := range names {
			a, _ := base.Tensors[n].Float32()
			b, err := got.Tensors[n].Float32()
			if err != nil || len(a) != len(b) {
				t.Fatalf("%s: %d values (%v), want %d", n, len(b), err, len(a))
			}
			moved := 0.0
			for i := range a {
				moved = max(moved, math.Abs(float64(a[i]-b[i])))
			}
			if moved == 0 {
				t.Errorf("%s: tensor %s did not move", r.Adapter, n)
			}
		}
	}
}
