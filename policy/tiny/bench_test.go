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

// arithRequests are 64 held-in problems "a+b=", sampled 8 times each at
// temperature 1 like a GRPO iteration: short completions.
func arithRequests() []policy.Request {
	reqs := make([]policy.Request, 64)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range reqs {
		p := TrainingProblem(rng)
		reqs[i] = policy.Request{ID: p.Prompt(), Prompt: p.Prompt(), Seed: int64(i)}
	}
	return reqs
}

// BenchmarkSampleArith samples like an RL iteration on the shipped model.
func BenchmarkSampleArith(b *testing.B) {
	benchSample(b, benchModel(b), arithRequests(), policy.Sampling{N: 8, Temperature: 1, MaxTokens: 8, Logprobs: true})
}

// BenchmarkSampleLong samples 24 tokens from 3-character prompts with an
// untrained model (which rarely ends early): what the KV cache is for.
func BenchmarkSampleLong(b *testing.B) {
	m, err := New(DefaultConfig(), 1)
	if err != nil {
		b.Fatal(err)
	}
	reqs := arithRequests()
	for i := range reqs {
		reqs[i].Prompt = reqs[i].Prompt[:3]
	}
	benchSample(b, m, reqs, policy.Sampling{N: 8, Temperature: 1, MaxTokens: 24, Logprobs: true})
}

func benchSample(b *testing.B, m *Model, reqs []policy.Request, s policy.Sampling) {
	ctx := context.Background()
	b.ReportAllocs()
	var cached float64
	tokens := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		out, err := m.Generate(ctx, nil, reqs, s)
		if err != nil {
			b.Fatal(err)
		}
		cached += time.Since(start).Seconds()
		for _, r := range out {
			for _, smp := range r {
				tokens += len(smp.TokenIDs)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(tokens)/cached, "sampled-tok/s")
	b.ReportMetric(float64(tokens)/float64(b.N*len(reqs)*s.Samples()), "tok/sample")

	// The same sampling recomputing every prefix, once, for the ratio.
	start := time.Now()
	n := sampleNoCache(m, reqs, s)
	uncached := time.Since(start).Seconds()
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
	sm := m.getSampler(maxSlots)
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
			q.done = t == EOS || q.gen >= s.MaxTokens // (stop strings ignored: a bound on the work)
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
	benchLoop(b, func(ctx context.Context) error {
		_, err := tr.Step(ctx, batch, NLL)
		return err
	})
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(rows*b.N)/sec, "train-tok/s")
	b.ReportMetric(float64(comp*b.N)/sec, "completion-tok/s")
}

func BenchmarkTrainFull(b *testing.B) { benchTrain(b, false) }
func BenchmarkTrainLoRA(b *testing.B) { benchTrain(b, true) }

func BenchmarkScore(b *testing.B) {
	m := benchModel(b)
	probs := HeldOutProblems(500)
	benchLoop(b, func(ctx context.Context) error {
		_, err := m.ExpectedPass1(ctx, nil, probs)
		return err
	})
	b.ReportMetric(float64(500*b.N)/b.Elapsed().Seconds(), "problems/s")
}

// benchLoop reports allocations and times b.N calls of op, failing the
// benchmark on the first error.
func benchLoop(b *testing.B, op func(ctx context.Context) error) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := op(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
