package policy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/internal/registry"
)

// Spec says which policy to open: a backend kind and its options, as the
// policy section of pipeline.yaml gives them.
type Spec struct {
	// Kind names the backend (Register): "embedded", "openai", ….
	Kind string
	// Model names the model: for embedded, the shipped weights' name or a
	// safetensors path; for a server, the served base model.
	Model string
	// Options are the backend's own keys of the section: a value its
	// Options method returned, decoded (nil: the backend's defaults).
	Options any
	// Dir is the directory relative paths are taken from (the pipeline
	// file's).
	Dir    string
	Logger zerolog.Logger
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
	// embedded backend's *tiny.Model), nil for servers. A stage that needs
	// more than sampling finds it by type assertion on a named capability:
	// ExactScorer (evaluation's exact pass@1), or one the stage declares
	// (trainers/embedded.Trainable, the weights the grpo trainer trains).
	Model Local
	// AdapterRoot is a directory the servers read adapters from (a shared
	// mount, or LocalAdapterRoot for a server on this machine), for a
	// backend whose servers read adapter files themselves; empty hands the
	// policy the task's own copy (a policy in this process).
	AdapterRoot string
	// Stop releases what Open started (a server, connections); nil when
	// nothing needs releasing.
	Stop func() error

	adaptersOnce sync.Once
	adapters     *Adapters
}

// Local is a model that runs in this process behind an opened policy
// (Opened.Model). What a stage needs of it beyond sampling is a separate
// interface found by type assertion (ExactScorer), so a backend offers
// only what it can.
type Local interface {
	// Version names the weights: the Identity of the policy that samples
	// them.
	Version() string
}

// ExactScorer is a Local model that computes the exact pass@1 of an
// evaluation (evaluators.TaskOptions.Exact) instead of estimating it from
// samples: for each prompt, the probability that one sample at
// temperature 1 is exactly its reference answer, with the adapter in
// adapterDir ("" for the base model). The embedded model is one.
type ExactScorer interface {
	Local
	ExactPass(ctx context.Context, adapterDir string, prompts []tables.Prompt) ([]float64, error)
}

// KeepAdapters is how many adapters an opened policy keeps loaded: the
// checkpoints the generate stage samples from (one per iteration in
// flight) and the one being evaluated.
const KeepAdapters = 3

// Adapters returns the opened policy's one adapter loader, shared by
// every stage that samples from it (generate, episodes, eval), so a
// server holds at most KeepAdapters of a run's adapters however many
// stages load them.
func (o *Opened) Adapters() *Adapters {
	o.adaptersOnce.Do(func() {
		o.adapters = NewAdapters(o.Policy, o.Identity, o.AdapterRoot, KeepAdapters)
	})
	return o.adapters
}

// UnloadTimeout bounds how long Close waits for the servers to unload the
// adapters the policy loaded.
const UnloadTimeout = 5 * time.Second

// Close unloads the adapters loaded through Adapters (within
// UnloadTimeout), then calls Stop. It may be called more than once when
// Stop may, and on a nil Opened.
func (o *Opened) Close() error {
	if o == nil {
		return nil
	}
	var err error
	o.adaptersOnce.Do(func() {}) // orders this read after any Adapters call
	if o.adapters != nil {
		ctx, cancel := context.WithTimeout(context.Background(), UnloadTimeout)
		err = o.adapters.Close(ctx)
		cancel()
	}
	if o.Stop != nil {
		err = errors.Join(err, o.Stop())
	}
	return err
}

// A Backend opens the policies of one kind. The program assembles its
// backends in one registry value (kind.Registry's Policies, made by
// cli/kinds.Registry), the list Backends.
type Backend interface {
	// Name is the kind the policy section names it by ("embedded").
	Name() string
	// Options returns the backend's options, zero: a pointer to a struct
	// whose yaml tags are the keys of the policy section it takes beside
	// kind and model (nil when it takes none). The pipeline config decodes
	// the section into it strictly and runs its Check, if it has one.
	Options() any
	// Open opens the policy.
	Open(ctx context.Context, s Spec) (*Opened, error)
}

// Checker is where option checks report problems; the pipeline config
// implements it, naming the file, line and column of the key.
type Checker interface {
	// Set reports whether the file names key ("endpoints").
	Set(key string) bool
	// Fail reports a problem at key's place; messages start with the
	// path they are about.
	Fail(key, hint, format string, a ...any)
	// Path is key's full path, for messages ("policy.endpoints[0]").
	Path(key string) string
}

// Checked are options with checks beyond their types; model is the
// section's model key.
type Checked interface {
	Check(c Checker, model string)
}

// Nouned is a backend that names its policies in messages ("the embedded
// model"); without it they are "a KIND policy".
type Nouned interface{ Noun() string }

// Noun is how messages name b's policies.
func Noun(b Backend) string {
	if n, ok := b.(Nouned); ok {
		return n.Noun()
	}
	return "a " + b.Name() + " policy"
}

// ErrUnknownKind is a policy kind no backend of the registry has.
var ErrUnknownKind = errors.New("unknown policy kind")

// Backends are the policy backends a program offers, in the order
// messages list them.
type Backends []Backend

// Kinds lists the backends' names, sorted.
func (bs Backends) Kinds() []string { return registry.Names(bs) }

// Lookup returns the backend named kind.
func (bs Backends) Lookup(kind string) (Backend, bool) { return registry.Find(bs, kind) }

// Open opens the policy a spec names with its kind's backend; an unknown
// kind is an ErrUnknownKind that lists the known ones.
func (bs Backends) Open(ctx context.Context, s Spec) (*Opened, error) {
	b, ok := bs.Lookup(s.Kind)
	if !ok {
		return nil, fmt.Errorf("%w %q (use %s)", ErrUnknownKind, s.Kind, registry.Or(bs.Kinds()))
	}
	return b.Open(ctx, s)
}
