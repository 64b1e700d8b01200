package server_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math"
	"math/rand/v2"
	"strings"
	"sync"

	"github.com/rlpipe/rlpipe/policy"
)

// detPolicy is a small deterministic policy: sample j of a request draws
// its tokens and log-probabilities from SampleSeed(seed, j), the prompt and
// the adapter. Its alphabet has the characters JSON must escape, and its
// log-probabilities use all of a float32's mantissa, so a transport that
// loses a bit shows.
type detPolicy struct {
	name       string
	maxContext int // prompts longer than this are invalid (default 200)

	mu       sync.Mutex
	adapters map[string]string
	calls    int
	// failWith, when set, makes every sample fail with that status.
	failWith string
}

var _ policy.AdapterLoader = (*detPolicy)(nil)

// alphabet is the vocabulary: token id k is alphabet[k].
var alphabet = []rune("abcdefgh <>&\"\\\n\té世🙂.")

func newDetPolicy(name string) *detPolicy {
	return &detPolicy{name: name, maxContext: 200, adapters: map[string]string{}}
}

func (p *detPolicy) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.calls++
	_, loaded := p.adapters[s.Adapter]
	fail := p.failWith
	p.mu.Unlock()
	version := p.name
	if s.Adapter != "" {
		if !loaded {
			return nil, fmt.Errorf("%w: %q", policy.ErrAdapterNotLoaded, s.Adapter)
		}
		version += "+" + s.Adapter
	}
	n := s.Samples()
	out := make([][]policy.Sample, len(reqs))
	for i, r := range reqs {
		prompt := r.Prompt
		for _, m := range r.Messages {
			prompt += m.Role + ": " + m.Content + "\n"
		}
		plen := len([]rune(prompt))
		if fail != "" {
			out[i] = policy.ErrorSamples(r, n, fail, fmt.Errorf("policy failure %s", fail), version)
			continue
		}
		if plen > p.maxContext {
			out[i] = policy.ErrorSamples(r, n, policy.StatusInvalid,
				fmt.Errorf("prompt is %d tokens; the context holds %d", plen, p.maxContext), version)
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(prompt))
		h.Write([]byte{0})
		h.Write([]byte(s.Adapter))
		out[i] = make([]policy.Sample, n)
		for j := range out[i] {
			out[i][j] = p.sample(r, j, s, h.Sum64(), plen, version)
		}
	}
	return out, nil
}

func (p *detPolicy) sample(r policy.Request, j int, s policy.Sampling, salt uint64, plen int, version string) policy.Sample {
	seed := policy.SampleSeed(r.Seed, j)
	if s.Temperature == 0 {
		seed = 0 // greedy: the same text for every seed
	}
	rng := rand.New(rand.NewPCG(seed, salt))
	limit := s.MaxTokens
	if limit == 0 {
		limit = 24
	}
	want := 1 + rng.IntN(30)
	smp := policy.Sample{RequestID: r.ID, Index: j, PromptTokens: plen, PolicyVersion: version,
		Status: policy.StatusOK, FinishReason: policy.FinishStop}
	var text strings.Builder
	for k := 0; k < want; k++ {
		if k == limit {
			smp.FinishReason = policy.FinishLength
			break
		}
		id := rng.IntN(len(alphabet))
		lp := -float32(rng.Float64() * 7)
		if k == 3 {
			lp = -math.SmallestNonzeroFloat32 // a subnormal
		}
		text.WriteRune(alphabet[id])
		if stop := hasStop(text.String(), s.Stop); stop >= 0 {
			t := text.String()[:stop]
			text.Reset()
			text.WriteString(t)
			smp.TokenIDs = append(smp.TokenIDs, int32(id))
			if s.Logprobs {
				smp.Logprobs = append(smp.Logprobs, lp)
			}
			smp.FinishReason = policy.FinishStop
			break
		}
		smp.TokenIDs = append(smp.TokenIDs, int32(id))
		if s.Logprobs {
			smp.Logprobs = append(smp.Logprobs, lp)
		}
	}
	smp.Text = text.String()
	return smp
}

func hasStop(text string, stops []string) int {
	for _, s := range stops {
		if i := strings.Index(text, s); i >= 0 && s != "" {
			return i
		}
	}
	return -1
}

func (p *detPolicy) LoadAdapter(ctx context.Context, name, dir string) error {
	if strings.Contains(dir, "missing") {
		return fmt.Errorf("read %s/adapter_config.json: %w", dir, fs.ErrNotExist)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.adapters[name] = dir
	return nil
}

func (p *detPolicy) UnloadAdapter(ctx context.Context, name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.adapters, name)
	return nil
}

// prompts returns n requests with varied prompts, ids and seeds, half of
// them chat transcripts when chat is set.
func prompts(n int, chat bool) []policy.Request {
	reqs := make([]policy.Request, n)
	for i := range reqs {
		id := fmt.Sprintf("q%03d", i)
		reqs[i] = policy.Request{ID: id, Seed: policy.RequestSeed(7, id)}
		if chat && i%2 == 1 {
			reqs[i].Messages = []policy.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: fmt.Sprintf("what is %d+%d? é世", i, i)}}
		} else {
			reqs[i].Prompt = fmt.Sprintf("Q: what is %d+%d? <b>\"&\"</b>\nA:", i, i)
		}
	}
	return reqs
}
