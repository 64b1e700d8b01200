package tiny

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/rlpipe/rlpipe/policy"
)

// maxSlots bounds the sequences a sampling worker decodes at once.
const maxSlots = 256

// seqState is one sample being generated.
type seqState struct {
	req, index int
	prompt     []int32 // without BOS
	maxNew     int
	pcg        rand.PCG
	rng        *rand.Rand
	tokens     []int32
	logprobs   []float32
	top        [][]policy.TokenLogprob // with Sampling.TopLogprobs
	promptLP   *policy.PromptLogprobs  // with Sampling.PromptLogprobs; shared by a request's sequences
	text       []byte
	finish     string
	stop       string // the stop string that ended the text
	slot       int32  // KV-cache slot while decoding
}

// sampler is a worker's reusable state.
type sampler struct {
	prefill, decode *acts
	kv              *kvCache
	slots           int // the sequences kv holds
	order           []int32
	probs           []float64
	tlogp           []float32 // a row's log softmax(z/T)
	active          []*seqState
}

// getSampler returns a sampler whose KV cache holds at least slots
// sequences (at most maxSlots). The cache is sized to the worker's
// sequences, not to maxSlots: an RL step's worker decodes 64 sequences,
// and a cache for 256 is 25 MB to allocate and clear whenever the pool
// was emptied by a collection, about every call in a training loop. A
// slot's rows are written before they are read, so a larger cache from
// the pool computes the same bits.
func (m *Model) getSampler(slots int) *sampler {
	s, ok := m.samplerPool.Get().(*sampler)
	if !ok {
		V := m.cfg.VocabSize()
		s = &sampler{prefill: newActs(m.cfg), decode: newActs(m.cfg), order: make([]int32, V), probs: make([]float64, V), tlogp: make([]float32, V)}
	}
	if s.slots < slots {
		s.kv, s.slots = newKVCache(m.cfg, slots), slots
	}
	return s
}

// PromptTokens tokenizes what a request asks the model to continue: its
// Prompt, or its Messages; its PromptTokenIDs are taken as they are (the
// model reads BOS before them, as before any prompt), once checked to be
// tokens of the vocabulary other than PAD and BOS. The tiny model has no
// chat template or roles: it reads the messages' contents in order (an
// assistant message's tool calls as the Hermes text it wrote them in,
// policy.Message.Text; the tools a request offers are not shown: the model
// knows its tools from its training), and an assistant message is
// followed by EOS, as the model ended the reply it sampled. So the prompt
// of an episode's next turn begins with the exact tokens of the turns
// before it, each reply's final EOS included, and the episode's token
// sequence is known exactly (a reply cut off at max_tokens has no EOS:
// the next prompt does not extend it, and the episode is not trained on).
func (m *Model) PromptTokens(r policy.Request) ([]int32, error) {
	if r.PromptTokenIDs != nil {
		return m.checkTokens(r.PromptTokenIDs)
	}
	if len(r.Messages) == 0 {
		return m.tok.encode(nil, r.Prompt)
	}
	var out []int32
	for i, msg := range r.Messages {
		var err error
		if out, err = m.tok.encode(out, msg.Text()); err != nil {
			return nil, fmt.Errorf("message %d (%s): %w", i+1, msg.Role, err)
		}
		if msg.Role == "assistant" {
			out = append(out, EOS)
		}
	}
	return out, nil
}

// Generate samples s.N completions of every request from the base model (a
// nil) or the adapter a; s.Adapter is not consulted (Policy resolves it).
// Sample j of a request draws from math/rand/v2's PCG seeded with
// (policy.SampleSeed(req.Seed, j), 0), one Float64 per token, so it does
// not depend on the other sequences of the call. Temperature 0 is greedy
// (ties to the lower id). Logprobs, when asked, are those of the
// distribution the token was drawn from before top-p: log softmax(z/T)
// (vLLM's processed logprobs without truncation; at temperature 0 and 1
// the model's own log-softmax), and so are TopLogprobs (the k most likely
// tokens of each position, ties to the lower id). The Prompt's, when
// asked, are the model's at temperature 1, as vLLM's prompt logprobs. MaxTokens 0 means up to the context.
// TokenIDs hold every sampled token, the final EOS and the tokens of a
// matched stop string included; Text holds neither. A request the model
// cannot serve (unknown characters, too long for the context) yields
// samples with Status policy.StatusInvalid.
func (m *Model) Generate(ctx context.Context, a *Adapter, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	w, err := m.weightsFor(a)
	if err != nil {
		return nil, err
	}
	version := m.Version()
	if a != nil {
		version += "+" + a.name
	}
	return m.generate(ctx, w, version, reqs, s)
}

// generate samples reqs from the weights w, the samples carrying version.
func (m *Model) generate(ctx context.Context, w *weights, version string, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	if err := policy.Validate(nil, s); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tiny generate: %w", err)
	}
	n := s.Samples()
	out := make([][]policy.Sample, len(reqs))
	var seqs []*seqState
	for i, r := range reqs {
		prompt, maxNew, err := m.prepare(r, s)
		if err != nil {
			out[i] = policy.ErrorSamples(r, n, policy.StatusInvalid, err, version)
			continue
		}
		for j := 0; j < n; j++ {
			q := &seqState{req: i, index: j, prompt: prompt, maxNew: maxNew}
			q.pcg.Seed(policy.SampleSeed(r.Seed, j), 0)
			q.rng = rand.New(&q.pcg)
			seqs = append(seqs, q)
		}
	}
	// Sequences are independent, so any split gives the same samples.
	workers := min(runtime.GOMAXPROCS(0), (len(seqs)+31)/32)
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for wk := 0; wk < workers; wk++ {
		lo, hi := wk*len(seqs)/workers, (wk+1)*len(seqs)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A bug here must fail the call, not kill the process that
			// serves it (rlpipe policy serve cannot recover a panic in a
			// goroutine of its own handler's callee).
			defer func() {
				if v := recover(); v != nil {
					errs[wk] = fmt.Errorf("tiny: sampling worker %d panicked: %v", wk, v)
				}
			}()
			sm := m.getSampler(min(maxSlots, hi-lo))
			defer m.samplerPool.Put(sm)
			for c := lo; c < hi; c += maxSlots {
				if err := sm.run(ctx, w, seqs[c:min(c+maxSlots, hi)], s); err != nil {
					errs[wk] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("tiny generate: %w", err)
		}
	}
	for _, q := range seqs {
		r := reqs[q.req]
		if out[q.req] == nil {
			out[q.req] = make([]policy.Sample, n)
		}
		smp := policy.Sample{
			RequestID: r.ID, Index: q.index, Text: string(q.text), TokenIDs: q.tokens,
			FinishReason: q.finish, StopReason: q.stop, PromptTokens: len(q.prompt) + 1, PolicyVersion: version, Status: policy.StatusOK,
			Prompt: q.promptLP,
		}
		if s.Logprobs {
			smp.Logprobs, smp.TopLogprobs = q.logprobs, q.top
		}
		out[q.req][q.index] = smp
	}
	return out, nil
}

// prepare tokenizes a request and works out how many tokens it may
// generate.
func (m *Model) prepare(r policy.Request, s policy.Sampling) ([]int32, int, error) {
	if err := r.Check(); err != nil {
		return nil, 0, err
	}
	prompt, err := m.PromptTokens(r)
	if err != nil {
		return nil, 0, fmt.Errorf("request %q: prompt %w", r.ID, err)
	}
	ctx := m.cfg.Context
	maxNew := s.MaxTokens
	if maxNew == 0 {
		maxNew = ctx - len(prompt)
	}
	// maxNew is compared, not added: a huge MaxTokens must not wrap past
	// the check and let a sequence run off the KV cache.
	if maxNew <= 0 || maxNew > ctx-len(prompt) {
		if s.MaxTokens == 0 {
			return nil, 0, fmt.Errorf("request %q: a prompt of %d tokens leaves no room to generate in the context of %d tokens (BOS included)", r.ID, len(prompt), ctx)
		}
		return nil, 0, fmt.Errorf("request %q: %d prompt tokens + %d max tokens exceed the context of %d tokens (BOS included)", r.ID, len(prompt), s.MaxTokens, ctx)
	}
	return prompt, maxNew, nil
}

// run generates the sequences of seqs (at most maxSlots) to completion.
func (sm *sampler) run(ctx context.Context, w *weights, seqs []*seqState, s policy.Sampling) error {
	c := w.cfg
	d, V := c.attnWidth(), c.VocabSize() // d: a key's or value's width
	// Prefill each distinct prompt once (consecutive sequences of a request
	// share it) and copy its keys and values to its sequences' slots.
	a := sm.prefill
	rows := 0
	for i, q := range seqs {
		if i == 0 || seqs[i-1].req != q.req {
			rows += len(q.prompt) + 1
		}
	}
	a.reset(rows)
	at := 0
	first := make([]int, len(seqs)) // last prompt row of each sequence
	for i, q := range seqs {
		if i > 0 && seqs[i-1].req == q.req {
			first[i] = first[i-1]
			continue
		}
		n := len(q.prompt) + 1
		a.spans = append(a.spans, span{at, n})
		for j := 0; j < n; j++ {
			t := BOS
			if j > 0 {
				t = q.prompt[j-1]
			}
			a.tokens[at+j], a.pos[at+j], a.start[at+j] = t, int32(j), int32(at)
		}
		at += n
		first[i] = at - 1
	}
	w.forward(a, nil)
	sm.active = sm.active[:0]
	for i, q := range seqs {
		n := len(q.prompt) + 1
		lo := (first[i] + 1 - n) * d
		for l := 0; l < c.Layers; l++ {
			dst := i * c.Context * d
			copy(sm.kv.k[l][dst:dst+n*d], a.ls[l].k[lo:lo+n*d])
			copy(sm.kv.v[l][dst:dst+n*d], a.ls[l].v[lo:lo+n*d])
		}
		r := first[i]
		if s.PromptLogprobs {
			if i > 0 && seqs[i-1].req == q.req {
				q.promptLP = seqs[i-1].promptLP
			} else {
				q.promptLP = promptLogprobs(q.prompt, a.logp[(r+1-n)*V:(r+1)*V], V, s.TopLogprobs)
			}
		}
		q.slot = int32(i)
		if !sm.emit(q, a.logits[r*V:(r+1)*V], a.logp[r*V:(r+1)*V], s, c.Vocab) {
			sm.active = append(sm.active, q)
		}
	}
	b := sm.decode
	for len(sm.active) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.reset(len(sm.active))
		for r, q := range sm.active {
			b.tokens[r] = q.tokens[len(q.tokens)-1]
			b.pos[r] = int32(len(q.prompt) + len(q.tokens))
			b.slot[r] = q.slot
		}
		w.forward(b, sm.kv)
		still := sm.active[:0]
		for r, q := range sm.active {
			if !sm.emit(q, b.logits[r*V:(r+1)*V], b.logp[r*V:(r+1)*V], s, c.Vocab) {
				still = append(still, q)
			}
		}
		sm.active = still
	}
	return nil
}

// emit samples the next token of q from a row's logits and reports whether
// q is finished.
func (sm *sampler) emit(q *seqState, logits, logp []float32, s policy.Sampling, vocab string) bool {
	t := sm.pick(logits, s.Temperature, s.TopP, q.rng)
	if s.Logprobs && tempered(s.Temperature) {
		temperedLogSoftmax(logits, sm.tlogp, s.Temperature)
		logp = sm.tlogp
	}
	q.tokens = append(q.tokens, t)
	q.logprobs = append(q.logprobs, logp[t])
	if s.Logprobs && s.TopLogprobs > 0 {
		q.top = append(q.top, topK(logp, s.TopLogprobs))
	}
	if t == EOS {
		q.finish = policy.FinishStop
		return true
	}
	if t >= numSpecial { // PAD and BOS, next to impossible, spell nothing
		q.text = append(q.text, vocab[t-numSpecial])
	}
	for _, stop := range s.Stop {
		if stop != "" && bytes.HasSuffix(q.text, []byte(stop)) {
			q.text = q.text[:len(q.text)-len(stop)]
			q.finish, q.stop = policy.FinishStop, stop
			return true
		}
	}
	if len(q.tokens) >= q.maxNew {
		q.finish = policy.FinishLength
		return true
	}
	return false
}

// pick draws a token: the argmax at temperature 0, else from softmax(z/T)
// cut to its top-p nucleus, with one rng.Float64(). Every token can be
// drawn, as in vLLM: the recorded log-probability is that of the
// distribution the token came from.
func (sm *sampler) pick(z []float32, temp, topP float64, rng *rand.Rand) int32 {
	V := len(z)
	best := int32(0)
	for i := int32(1); i < int32(V); i++ {
		if z[i] > z[best] {
			best = i
		}
	}
	if temp == 0 {
		return best
	}
	zmax := float64(z[best])
	p := sm.probs[:V]
	var total float64
	for i := 0; i < V; i++ {
		p[i] = float64(exp32(float32((float64(z[i]) - zmax) / temp)))
		total += p[i]
	}
	order := sm.order[:0]
	for i := int32(0); i < int32(V); i++ {
		order = append(order, i)
	}
	if topP > 0 && topP < 1 {
		// Sort by probability, descending, ties by id; keep the shortest
		// prefix whose mass reaches topP.
		for i := 1; i < len(order); i++ {
			for j := i; j > 0 && p[order[j]] > p[order[j-1]]; j-- {
				order[j], order[j-1] = order[j-1], order[j]
			}
		}
		var cum float64
		for k, t := range order {
			cum += p[t]
			if cum >= topP*total {
				order = order[:k+1]
				total = cum
				break
			}
		}
	}
	u := rng.Float64() * total
	for _, t := range order {
		u -= p[t]
		if u < 0 {
			return t
		}
	}
	return order[len(order)-1]
}

// promptLogprobs reads a prompt's log-probabilities off its prefill rows
// (BOS first: row j predicts prompt[j]), with the k most likely tokens of
// each row when k > 0.
func promptLogprobs(prompt []int32, logp []float32, V, k int) *policy.PromptLogprobs {
	out := &policy.PromptLogprobs{TokenIDs: prompt, Logprobs: make([]float32, len(prompt))}
	for j, t := range prompt {
		row := logp[j*V : (j+1)*V]
		out.Logprobs[j] = row[t]
		if k > 0 {
			out.TopLogprobs = append(out.TopLogprobs, topK(row, k))
		}
	}
	return out
}

// topK returns the k most likely tokens of a log-softmax row, most likely
// first, ties to the lower id.
func topK(logp []float32, k int) []policy.TokenLogprob {
	k = min(k, len(logp))
	out := make([]policy.TokenLogprob, 0, k)
	for t := int32(0); t < int32(len(logp)); t++ {
		lp := logp[t]
		if len(out) == k {
			if !(lp > out[k-1].Logprob) {
				continue
			}
		} else {
			out = append(out, policy.TokenLogprob{})
		}
		j := len(out) - 1
		for ; j > 0 && lp > out[j-1].Logprob; j-- {
			out[j] = out[j-1]
		}
		out[j] = policy.TokenLogprob{ID: t, Logprob: lp}
	}
	return out
}
