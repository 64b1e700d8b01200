package tiny

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/policy"
)

// Benchmarks, run with
//
//	go test -run '^$' -bench . -benchtime 3x ./policy/tiny/
//
// They report tokens per second as metrics (sampled tok/s counts generated
// tokens; train tok/s counts every position the forward and backward
// passes process, completion tok/s the trained-on tokens) and the
// KV-cache speed-up as a ratio measured in the same run.

func benchModel(b *testing.B) *Model {
	m, err := Embedded()
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// benchRequests are 64 prompts of a few characters; sampled at temperature
// 1.5 with MaxTokens 24 and no stop, they generate long completions, which
// is what the KV cache is for.
func benchRequests() []policy.Request {
	reqs := make([]policy.Request, 64)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range reqs {
		p := TrainingProblem(rng)
		reqs[i] = policy.Request{ID: p.Prompt(), Prompt: p.Prompt()[:3], Seed: int64(i)}
	}
	return reqs
}

var benchSampling = policy.Sampling{N: 8, Temperature: 1.5, MaxTokens: 24, Logprobs: true}

func BenchmarkSample(b *testing.B) {
	m := benchModel(b)
	reqs := benchRequests()
	ctx := context.Background()
	b.ReportAllocs()
	var cached, uncached float64 // seconds per token
	tokens := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		out, err := m.Generate(ctx, nil, reqs, benchSampling)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, r := range out {
			for _, s := range r {
				n += len(s.TokenIDs)
			}
		}
		cached += time.Since(start).Seconds()
		tokens += n
	}
	b.StopTimer()
	b.ReportMetric(float64(tokens)/cached, "sampled-tok/s")

	// The same sampling recomputing every prefix, once, for the ratio.
	start := time.Now()
	n := sampleNoCache(m, reqs, benchSampling)
	uncached = time.Since(start).Seconds()
	b.ReportMetric(float64(n)/uncached, "nocache-tok/s")
	b.ReportMetric((float64(tokens)/cached)/(float64(n)/uncached), "cache-speedup")
}

// sampleNoCache samples like Generate but runs the whole prefix of every
// sequence through the model for each new token.
func sampleNoCache(m *Model, reqs []policy.Request, s policy.Sampling) int {
	type seq struct {
		toks []int32
		rng  *rand.Rand
		done bool
		gen  int
	}
	var seqs []*seq
	for _, r := range reqs {
		p, _ := m.Tokenize(r.Prompt)
		for j := 0; j < s.Samples(); j++ {
			seqs = append(seqs, &seq{toks: append([]int32{BOS}, p...), rng: rand.New(rand.NewPCG(policy.SampleSeed(r.Seed, j), 0))})
		}
	}
	sm := m.getSampler()
	a := newActs(m.cfg)
	V := m.cfg.VocabSize()
	total := 0
	for {
		var active []*seq
		rows := 0
		for _, q := range seqs {
			if !q.done {
				active = append(active, q)
				rows += len(q.toks)
			}
		}
		if len(active) == 0 {
			return total
		}
		a.reset(rows)
		at := 0
		for _, q := range active {
			a.spans = append(a.spans, span{at, len(q.toks)})
			for j, t := range q.toks {
				a.tokens[at+j], a.pos[at+j], a.start[at+j] = t, int32(j), int32(at)
			}
			at += len(q.toks)
		}
		m.w.forward(a, nil)
		at = 0
		for _, q := range active {
			at += len(q.toks)
			r := at - 1
			t := sm.pick(a.logits[r*V:(r+1)*V], s.Temperature, s.TopP, q.rng)
			q.toks = append(q.toks, t)
			q.gen++
			total++
			q.done = t == EOS || q.gen >= s.MaxTokens
		}
	}
}

func benchTrain(b *testing.B, lora bool) {
	m := benchModel(b)
	var a *Adapter
	if lora {
		var err error
		if a, err = m.NewAdapter(LoRAConfig{Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
	tr, err := NewTrainer(m, a, TrainConfig{LR: 1e-4})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2, 2))
	batch := make([]Example, 64)
	rows, comp := 0, 0
	for i := range batch {
		batch[i], _ = m.Example(TrainingProblem(rng))
		rows += inputRows(batch[i])
		comp += len(batch[i].Completion)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tr.Step(ctx, batch, NLL); err != nil {
			b.Fatal(err)
		}
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(rows*b.N)/sec, "train-tok/s")
	b.ReportMetric(float64(comp*b.N)/sec, "completion-tok/s")
}

func BenchmarkTrainFull(b *testing.B) { benchTrain(b, false) }
func BenchmarkTrainLoRA(b *testing.B) { benchTrain(b, true) }

func BenchmarkScore(b *testing.B) {
	m := benchModel(b)
	probs := HeldOutProblems(500)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.ExpectedPass1(ctx, nil, probs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(500*b.N)/b.Elapsed().Seconds(), "problems/s")
}
