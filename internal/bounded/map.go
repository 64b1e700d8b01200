// Package bounded holds Map, a cache for values that never go stale (the
// decoded records of an immutable tree, what was read from an immutable
// commit) which stays small by emptying itself instead of growing: the
// embedded store's tree cache and the UI's commit cache use it. Emptying
// at once is crude, but bounded, and a refill costs one read per key.
//
// Tail is the other bounded thing: a writer that keeps the last bytes of a
// child process's stderr, for the error that says why it died (the SkyRL-gym
// worker, the OpenEnv server, the chat-template worker, the vLLM server, a
// command stage, the reasoning-gym generator); Lines gives its last lines.
package bounded

import "sync"

// Map is a map safe for concurrent use that holds at most its bound of
// keys: putting a key into a full Map empties it first.
type Map[K comparable, V any] struct {
	mu  sync.Mutex
	max int
	m   map[K]V
}

// NewMap returns an empty Map that holds at most max keys (at least 1).
func NewMap[K comparable, V any](max int) *Map[K, V] {
	return &Map[K, V]{max: max, m: map[K]V{}}
}

// Get returns the value at k and whether there is one.
func (c *Map[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

// Put sets the value at k, first emptying the Map if it is full.
func (c *Map[K, V]) Put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(k, v)
}

// Add sets the value at k if k has none, first emptying the Map if it is
// full, and reports whether it did: the check and the write are one step.
func (c *Map[K, V]) Add(k K, v V) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok {
		return false
	}
	c.put(k, v)
	return true
}

func (c *Map[K, V]) put(k K, v V) {
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[k] = v
}

// Len returns the number of keys held.
func (c *Map[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
