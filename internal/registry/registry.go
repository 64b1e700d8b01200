// Package registry is how rlpipe finds plug-ins by name. Registry is
// the map store drivers register into by URI scheme (artifacts), as
// database/sql registers drivers: the one registration left in init. It
// is safe for concurrent use; registering a name twice is a programming
// error and panics.
//
//	var drivers = registry.New[Driver]("artifacts", "scheme")
//	drivers.Register("file", fileDriver{})
//	d, ok := drivers.Lookup("file")
//
// Every other plug-in kind (policy and tracker backends, RL environments,
// metrics, advantage estimators) is a list of Named values in the one
// registry value the program assembles (kind.Registry); Find, Names and
// Lookup search such a list.
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
// second registration ("artifacts: Register called twice for scheme x").
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
