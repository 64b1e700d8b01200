package embedded_test

import (
	"context"
	"testing"

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
