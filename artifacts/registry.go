package artifacts

import (
	"context"
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/internal/registry"
)

// Driver opens and creates repositories of one backend. Backends register
// a Driver for their URI scheme with Register, usually from an init
// function, the way database/sql drivers do.
type Driver interface {
	// Open opens an existing repository; ErrRepositoryNotFound if absent.
	Open(ctx context.Context, uri string, opts *Options) (Store, error)
	// Create creates a repository and opens it; ErrRepositoryExists if present.
	Create(ctx context.Context, uri string, opts *Options) (Store, error)
}

// Options configure Open and Create. Nil means defaults.
type Options struct {
	// DefaultBranch names the first branch of a new repository ("main").
	DefaultBranch string
	// StorageNamespace is where a lakeFS server keeps a new repository's
	// data (e.g. "local://rlpipe/runs" or "s3://bucket/prefix"); the
	// embedded store ignores it.
	StorageNamespace string
	// Logger receives debug lines; the zero value discards them.
	Logger zerolog.Logger
}

// EnsureDefaults fills unset fields.
func (o *Options) EnsureDefaults() {
	if o.DefaultBranch == "" {
		o.DefaultBranch = "main"
	}
}

// DefaultURI is the embedded store in the working directory.
const DefaultURI = "./.rlpipe"

var drivers = registry.New[Driver]("artifacts", "scheme")

// Register makes a backend available for URIs of the form scheme://…. The
// scheme "file" also serves plain paths. Registering a scheme twice panics.
func Register(scheme string, d Driver) { drivers.Register(scheme, d) }

// Schemes lists the registered URI schemes.
func Schemes() []string { return drivers.Names() }

// Scheme returns the scheme of a store URI: the part before "://", or
// "file" for a plain path.
func Scheme(uri string) string {
	if i := strings.Index(uri, "://"); i > 0 {
		return uri[:i]
	}
	return "file"
}

// driverFor returns the backend of a store URI and the URI itself, ""
// read as DefaultURI.
func driverFor(uri string) (Driver, string, error) {
	if uri == "" {
		uri = DefaultURI
	}
	scheme := Scheme(uri)
	d, ok := drivers.Lookup(scheme)
	if !ok {
		return nil, uri, fmt.Errorf("%w: store %q: no backend for scheme %q (known: %s)", ErrInvalid, uri, scheme, strings.Join(Schemes(), ", "))
	}
	return d, uri, nil
}

// Open opens the repository a store URI names: a path for the embedded
// store ("" means DefaultURI), or lakefs://<repo> for a lakeFS server.
func Open(ctx context.Context, uri string, opts *Options) (Store, error) {
	d, uri, err := driverFor(uri)
	if err != nil {
		return nil, err
	}
	return d.Open(ctx, uri, withDefaults(opts))
}

// Create creates the repository a store URI names and opens it.
func Create(ctx context.Context, uri string, opts *Options) (Store, error) {
	d, uri, err := driverFor(uri)
	if err != nil {
		return nil, err
	}
	return d.Create(ctx, uri, withDefaults(opts))
}

// ValueOf returns *p, or the zero T when p is nil: how a function reads
// its optional options struct (nil means defaults) before filling them in.
func ValueOf[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

func withDefaults(opts *Options) *Options {
	o := ValueOf(opts)
	o.EnsureDefaults()
	return &o
}
