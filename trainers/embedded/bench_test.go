package embedded_test

import (
	"context"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/trainers/embedded"
)

// BenchmarkUpdate times one GRPO update on 16 prompts × 8 samples of the
// base model (the learning test's batch): advantages, then one AdamW step
// on the LoRA factors. train_tok/s counts the completion tokens trained
// on; pos/s every position the forward and backward passes cover (BOS,
// prompt and completion but its last token).
func BenchmarkUpdate(b *testing.B) {
	for _, bc := range []struct {
		name string
		o    embedded.Options
	}{
		{"beta=0", embedded.Options{}},
		{"beta=0.04", embedded.Options{Beta: 0.04}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m := embeddedModel(b)
			batch := sampleBatch(b, m, nil, 16, 1)
			res, err := newTrainer(b, m, bc.o).Update(context.Background(), batch)
			if err != nil {
				b.Fatal(err)
			}
			// Positions per update: the trajectories and advantages share
			// the (prompt id, sample index) order of sampleBatch.
			positions := 0
			for i, a := range res.Advantages {
				if !a.Mask {
					positions += len(batch.Prompts[i/8].Prompt) + len(batch.Trajectories[i].TokenIDs)
				}
			}
			tr := newTrainer(b, m, bc.o)
			ctx := context.Background()
			b.ReportAllocs()
			tokens, updates := 0, 0
			for b.Loop() {
				res, err := tr.Update(ctx, batch)
				if err != nil {
					b.Fatal(err)
				}
				tokens += res.Metrics.TrainTokens
				updates++
			}
			s := b.Elapsed().Seconds()
			b.ReportMetric(float64(tokens)/s, "train_tok/s")
			b.ReportMetric(float64(positions*updates)/s, "pos/s")
		})
	}
}

// BenchmarkFullVsLoRAIteration times one loop iteration end to end with
// full fine-tuning (lora: none) against the same with LoRA, in the same
// run: iteration 2 of a fresh run, whose generate stage loads the
// checkpoint iteration 1 committed to the store (the whole model, or the
// adapter) into the embedded policy, samples 4 prompts × 8, rewards them,
// trains, and commits the new checkpoint. full/lora is the ratio of their
// times; full_ms and lora_ms the times per iteration.
func BenchmarkFullVsLoRAIteration(b *testing.B) {
	m := embeddedModel(b)
	ctx := context.Background()
	modes := []struct {
		name string
		o    embedded.Options
	}{{"full", embedded.Options{LR: 3e-4, LoRA: embedded.LoRAOptions{None: true}}}, {"lora", embedded.Options{LR: 2e-3}}}
	var spent [2]time.Duration
	b.ReportAllocs()
	for b.Loop() {
		for i, mode := range modes {
			b.StopTimer()
			st := newStore(b, 64)
			r := openRun(b, st, "bench-"+mode.name, 5)
			cfg := loopConfig(2, faultBatch)
			cfg.Stop = func(it int) bool { return it == 1 }
			if s, err := r.Loop(ctx, cfg, stages(b, m, embedded.Task(m, mode.o))); err != nil || s.Iteration != 1 {
				b.Fatalf("%s: iteration 1: %+v, %v", mode.name, s, err)
			}
			b.StartTimer()
			start := time.Now()
			if s, err := r.Loop(ctx, loopConfig(2, faultBatch), stages(b, m, embedded.Task(m, mode.o))); err != nil || s.Iteration != 2 {
				b.Fatalf("%s: iteration 2: %+v, %v", mode.name, s, err)
			}
			spent[i] += time.Since(start)
			b.StopTimer()
			r.Close()
			b.StartTimer()
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(spent[0].Milliseconds())/n, "full_ms")
	b.ReportMetric(float64(spent[1].Milliseconds())/n, "lora_ms")
	b.ReportMetric(spent[0].Seconds()/spent[1].Seconds(), "full/lora")
}
