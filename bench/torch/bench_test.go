package torch_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/trainers/embedded"
	"github.com/rlpipe/rlpipe/trainers/external/torchtest"
)

// BenchmarkTorchStepVsEmbedded takes one GRPO step on a demo-sized batch
// (16 training problems × 8 completions of up to 5 tokens, sampled from
// tiny-arith) from the same LoRA adapter, with the same hyperparameters,
// with the embedded trainer in process and with grpo_train.py in one
// process and under torchrun (2 ranks), and reports each one's step time
// and the ratios torch/embedded: the step alone and the whole call. The
// first call of each is not timed (it warms the page cache).
func BenchmarkTorchStepVsEmbedded(b *testing.B) {
	py := torchtest.Python(b)
	ddp := torchtest.TorchrunArgv(b, py, 2)
	single := []string{py, torchtest.Script(b)}
	m, model := torchtest.Export(b)
	f := torchtest.Batch(b, m, filepath.Join(b.TempDir(), "batch"), 5, 16, 8, 0)
	o := embedded.Options{LR: 2e-3, KeepZeroStd: true}
	ctx := context.Background()
	// The start adapter: one embedded step on another batch.
	start := torchtest.StartAdapter(b, m, o, 6, 16, 8)
	hp := torchtest.Hparams(model)
	hp["micro_batch_size"] = 16
	embeddedStep := func() time.Duration {
		t, err := embedded.Load(m, o, start)
		if err != nil {
			b.Fatal(err)
		}
		begin := time.Now()
		if _, err := t.Update(ctx, f.Batch); err != nil {
			b.Fatal(err)
		}
		return time.Since(begin)
	}
	embeddedStep()
	torchtest.Run(b, single, f, hp, start, "", 1)
	torchtest.Run(b, ddp, f, hp, start, "", 1)

	b.ResetTimer()
	var emb, oneStep, oneCall, twoStep, twoCall time.Duration
	for range b.N {
		emb += embeddedStep()
		r := torchtest.Run(b, single, f, hp, start, "", 1)
		oneStep += time.Duration(r.Metrics.TrainSeconds * float64(time.Second))
		oneCall += r.Wall
		r = torchtest.Run(b, ddp, f, hp, start, "", 1)
		twoStep += time.Duration(r.Metrics.TrainSeconds * float64(time.Second))
		twoCall += r.Wall
	}
	b.StopTimer()
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / n }
	b.ReportMetric(ms(emb), "embedded_ms/step")
	b.ReportMetric(ms(oneStep), "torch_ms/step")
	b.ReportMetric(ms(twoStep), "torchrun2_ms/step")
	b.ReportMetric(ms(oneCall)/1000, "torch_s/call")
	b.ReportMetric(ms(twoCall)/1000, "torchrun2_s/call")
	b.ReportMetric(float64(oneStep)/float64(emb), "torch/embedded")
	b.ReportMetric(float64(twoStep)/float64(emb), "torchrun2/embedded")
	b.ReportMetric(float64(oneCall)/float64(emb), "torch_call/embedded")
	b.ReportMetric(float64(twoCall)/float64(emb), "torchrun2_call/embedded")
	b.ReportMetric(0, "ns/op")
}
