package pipeline

import (
	"context"
	"fmt"
	"sync"
)

// Machine is what the local executor may hand out.
type Machine struct {
	CPU      float64 // cores
	MemoryMB int
	GPU      int
	GPUType  string
}

// fit is r cut to what m has, without GPUs: the resources of a
// bookkeeping task the run executes itself though its environment was
// sized for other hosts (Task.Bookkeeping).
func (m Machine) fit(r Resources) Resources {
	return Resources{CPU: min(r.CPU, m.CPU), MemoryMB: min(r.MemoryMB, m.MemoryMB)}
}

// pool admits tasks when their resources fit, and caps each environment's
// concurrency. A task that can never fit fails at once.
type pool struct {
	mu      sync.Mutex
	machine Machine
	cpu     float64
	mem     int
	gpu     int
	running map[string]int // per environment
	changed chan struct{}  // closed and replaced on every release
}

func newPool(m Machine) *pool {
	return &pool{machine: m, running: map[string]int{}, changed: make(chan struct{})}
}

func (p *pool) fits(r Resources) error {
	m := p.machine
	switch {
	case r.GPU > 0 && r.GPUType != "" && m.GPUType != "" && r.GPUType != m.GPUType:
		return fmt.Errorf("%w: it needs %d GPU(s) of type %s; this machine has %s (change the environment's gpu_type, or run on a machine that has them)", ErrUnschedulable, r.GPU, r.GPUType, m.GPUType)
	case r.GPU > m.GPU:
		return fmt.Errorf("%w: it needs %d GPU(s); this machine has %d (lower the environment's resources.gpu, or run on a machine that has them)", ErrUnschedulable, r.GPU, m.GPU)
	case r.CPU > m.CPU:
		return fmt.Errorf("%w: it needs %g CPU cores; this machine has %g (lower resources.cpu)", ErrUnschedulable, r.CPU, m.CPU)
	case r.MemoryMB > m.MemoryMB:
		return fmt.Errorf("%w: it needs %d MiB of memory; this machine has %d (lower resources.memory_mb)", ErrUnschedulable, r.MemoryMB, m.MemoryMB)
	}
	return nil
}

// acquire blocks until the task's resources are free and its
// environment is under its concurrency, then returns a release function.
func (p *pool) acquire(ctx context.Context, env string, s Settings) (func(), error) {
	return p.admit(ctx, env, s, true)
}

// admit is acquire; without wait it returns ErrBusy at once instead of
// blocking.
func (p *pool) admit(ctx context.Context, env string, s Settings, wait bool) (func(), error) {
	r := s.Resources
	if err := p.fits(r); err != nil {
		return nil, err
	}
	for {
		p.mu.Lock()
		ok := p.cpu+r.CPU <= p.machine.CPU+1e-9 && p.mem+r.MemoryMB <= p.machine.MemoryMB && p.gpu+r.GPU <= p.machine.GPU &&
			(s.Concurrency == 0 || p.running[env] < s.Concurrency)
		if ok {
			p.cpu += r.CPU
			p.mem += r.MemoryMB
			p.gpu += r.GPU
			p.running[env]++
			p.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { p.release(env, r) }) }, nil
		}
		changed := p.changed
		p.mu.Unlock()
		if !wait {
			return nil, ErrBusy
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (p *pool) release(env string, r Resources) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cpu -= r.CPU
	p.mem -= r.MemoryMB
	p.gpu -= r.GPU
	p.running[env]--
	close(p.changed)
	p.changed = make(chan struct{})
}

// warmSlot holds one warm worker's state; warmPool keeps an environment's.
type warmSlot struct{ state any }

type warmPool struct {
	mu   sync.Mutex
	free []*warmSlot
}

func (w *warmPool) get() *warmSlot {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.free); n > 0 {
		s := w.free[n-1]
		w.free = w.free[:n-1]
		return s
	}
	return &warmSlot{}
}

func (w *warmPool) put(s *warmSlot) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.free = append(w.free, s)
}

// warmPools keeps each environment's warm workers.
type warmPools struct {
	mu sync.Mutex
	m  map[string]*warmPool
}

// env returns environment name's pool, creating it on first use.
func (w *warmPools) env(name string) *warmPool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]*warmPool{}
	}
	p := w.m[name]
	if p == nil {
		p = &warmPool{}
		w.m[name] = p
	}
	return p
}
