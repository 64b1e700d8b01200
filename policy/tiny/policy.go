package tiny

import (
	"context"
	"fmt"
	"sync"

	"github.com/rlpipe/rlpipe/policy"
)

// Policy serves a Model in process as a policy.Policy that hot-loads LoRA
// adapters and full weights of the same model. It is safe for concurrent
// use.
type Policy struct {
	m        *Model
	mu       sync.RWMutex
	adapters map[string]*Adapter
	models   map[string]*Model // full weights (LoadWeights), by name
}

var (
	_ policy.Policy        = (*Policy)(nil)
	_ policy.AdapterLoader = (*Policy)(nil)
	_ policy.WeightsLoader = (*Policy)(nil)
	_ policy.TokenTexter   = (*Policy)(nil)
)

// NewPolicy returns a policy sampling from m.
func NewPolicy(m *Model) *Policy {
	return &Policy{m: m, adapters: map[string]*Adapter{}, models: map[string]*Model{}}
}

// Model returns the base model.
func (p *Policy) Model() *Model { return p.m }

// Generate samples from the base model, or from the adapter or full
// weights s.Adapter names (ErrAdapterNotLoaded if none is loaded under
// that name); see Model.Generate. Samples of full weights carry the
// version "<base version>+<name>", as an adapter's do. Chat requests are
// served as Model.PromptTokens renders them: the messages' contents in
// order, an EOS after each assistant's.
func (p *Policy) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	if s.Adapter != "" {
		p.mu.RLock()
		wm := p.models[s.Adapter]
		p.mu.RUnlock()
		if wm != nil {
			return wm.generate(ctx, wm.w, p.m.Version()+"+"+s.Adapter, reqs, s)
		}
	}
	a, err := p.adapter(s.Adapter)
	if err != nil {
		return nil, err
	}
	return p.m.Generate(ctx, a, reqs, s)
}

// TokenText returns the character token id stands for, or "<pad>",
// "<bos>", "<eos>" for the special tokens; see Model.TokenText.
func (p *Policy) TokenText(id int32) string { return p.m.TokenText(id) }

// Adapter returns the adapter loaded as name, nil for "".
func (p *Policy) adapter(name string) (*Adapter, error) {
	if name == "" {
		return nil, nil
	}
	p.mu.RLock()
	a := p.adapters[name]
	p.mu.RUnlock()
	if a == nil {
		return nil, fmt.Errorf("tiny policy: adapter %q: %w", name, policy.ErrAdapterNotLoaded)
	}
	return a, nil
}

// LoadAdapter reads the PEFT adapter directory dir and makes it available
// as name, replacing any adapter of that name. Shapes that do not fit the
// model are an error wrapping policy.ErrAdapterShape.
func (p *Policy) LoadAdapter(ctx context.Context, name, dir string) error {
	return hold(ctx, p, p.adapters, "adapter", name, dir, func() (*Adapter, error) { return p.m.loadAdapter(name, dir) })
}

// UnloadAdapter forgets the adapter name; ErrAdapterNotLoaded if there is
// none.
func (p *Policy) UnloadAdapter(ctx context.Context, name string) error {
	return release(p, p.adapters, "adapter", name)
}

// LoadWeights reads the full-weights directory dir (LoadWeightsDir: a
// model of the base model's shape) and makes it available as name,
// replacing any model of that name. A model of another shape is an error
// wrapping policy.ErrWeightsShape; shards that do not match their index
// one wrapping policy.ErrShards.
func (p *Policy) LoadWeights(ctx context.Context, name, dir string) error {
	return hold(ctx, p, p.models, "weights", name, dir, func() (*Model, error) { return LoadWeightsDir(p.m, dir) })
}

// UnloadWeights forgets the weights name; ErrAdapterNotLoaded if there
// are none.
func (p *Policy) UnloadWeights(ctx context.Context, name string) error {
	return release(p, p.models, "weights", name)
}

// hold reads a checkpoint (what: "adapter" or "weights") with read and
// keeps it in set as name.
func hold[T any](ctx context.Context, p *Policy, set map[string]T, what, name, dir string, read func() (T, error)) error {
	if name == "" {
		return fmt.Errorf("tiny policy: load %s from %s: the name is empty", what, dir)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	v, err := read()
	if err != nil {
		return fmt.Errorf("tiny policy: %w", err)
	}
	p.mu.Lock()
	set[name] = v
	p.mu.Unlock()
	return nil
}

// release drops name from set; ErrAdapterNotLoaded if it is not there.
func release[T any](p *Policy, set map[string]T, what, name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := set[name]; !ok {
		return fmt.Errorf("tiny policy: unload %s %q: %w", what, name, policy.ErrAdapterNotLoaded)
	}
	delete(set, name)
	return nil
}
