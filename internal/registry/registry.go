// Package registry is the one shape of rlpipe's registries by name, as
// database/sql registers drivers: store drivers by URI scheme
// (artifacts), policy backends and experiment trackers by kind. A
// registry is safe for concurrent use; registering a name twice is a
// programming error and panics.
//
//	var backends = registry.New[Backend]("policy", "kind")
//	backends.Register("embedded", embeddedBackend{})
//	b, ok := backends.Lookup("embedded")
package registry

import (
	"slices"
	"sync"
)

// Registry holds values by name.
type Registry[T any] struct {
	owner, noun string
	mu          sync.RWMutex
	m           map[string]T
}

// New returns an empty registry; owner and noun name it in the panic of a
// second registration ("policy: Register called twice for kind x").
func New[T any](owner, noun string) *Registry[T] {
	return &Registry[T]{owner: owner, noun: noun, m: map[string]T{}}
}

// Register adds v under name; a name registered twice panics.
func (r *Registry[T]) Register(name string, v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.m[name]; dup {
		panic(r.owner + ": Register called twice for " + r.noun + " " + name)
	}
	r.m[name] = v
}

// Lookup returns the value registered under name.
func (r *Registry[T]) Lookup(name string) (T, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.m[name]
	return v, ok
}

// Names lists the registered names, sorted.
func (r *Registry[T]) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.m))
	for k := range r.m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
