package policy

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Spec says which policy to open: a backend kind and its options, as the
// policy section of pipeline.yaml gives them.
type Spec struct {
	// Kind names the backend (Register): "embedded", "openai", ….
	Kind string
	// Model names the model: for embedded, the shipped weights' name or a
	// safetensors path; for a server, the served base model.
	Model string
	// Serve is how a backend that runs in process is reached: in process
	// or over HTTP on loopback (embedded only).
	Serve string
	// Endpoints are a server backend's base URLs, balanced.
	Endpoints []string
	// APIKey is the servers' key, read from the environment by the
	// caller; it never enters a config or a store.
	APIKey      string
	Concurrency int
	Timeout     time.Duration
	Retries     int
	Logger      zerolog.Logger
}

// Opened is an open policy: what the generate and eval stages sample from.
type Opened struct {
	Policy Policy
	// Identity names the base model for cache keys and policy versions;
	// it is the same however the policy is reached, when samples agree.
	Identity string
	// Addr is the loopback address an in-process model is served on, when
	// it is served.
	Addr string
	// Model is the backend's own model when it runs in this process (the
	// embedded backend's *tiny.Model), for stages that need more than
	// sampling: the embedded trainer, exact pass@1. Nil for servers.
	Model any
	// Stop releases what Open started (a server, connections); nil when
	// nothing needs releasing.
	Stop func() error
}

// Close calls Stop. It may be called more than once when Stop may, and on
// a nil Opened.
func (o *Opened) Close() error {
	if o == nil || o.Stop == nil {
		return nil
	}
	return o.Stop()
}

// A Backend opens the policies of one kind. Backends register themselves
// with Register, the way store drivers do (artifacts.Register).
type Backend interface {
	Open(ctx context.Context, s Spec) (*Opened, error)
}

// BackendFunc is a Backend that is a function.
type BackendFunc func(ctx context.Context, s Spec) (*Opened, error)

// Open calls f.
func (f BackendFunc) Open(ctx context.Context, s Spec) (*Opened, error) { return f(ctx, s) }

var (
	backendsMu sync.RWMutex
	backends   = map[string]Backend{}
)

// Register makes a backend available under kind. Registering a kind twice
// panics.
func Register(kind string, b Backend) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	if _, dup := backends[kind]; dup {
		panic("policy: Register called twice for kind " + kind)
	}
	backends[kind] = b
}

// Kinds lists the registered backends' kinds, sorted.
func Kinds() []string {
	backendsMu.RLock()
	defer backendsMu.RUnlock()
	out := make([]string, 0, len(backends))
	for k := range backends {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Open opens the policy a spec names with its kind's backend.
func Open(ctx context.Context, s Spec) (*Opened, error) {
	backendsMu.RLock()
	b, ok := backends[s.Kind]
	backendsMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("policy: unknown kind %q (use %s)", s.Kind, strings.Join(Kinds(), " or "))
	}
	return b.Open(ctx, s)
}
