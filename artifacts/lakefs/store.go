package lakefs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/internal/lakefsapi"
)

// Scheme is the URI scheme of lakeFS stores: lakefs://<repository>.
const Scheme = "lakefs"

func init() {
	artifacts.Register(Scheme, driver{})
}

// The store implements the core contract and every extra ability except
// Collector: a lakeFS server runs its own garbage collection.
var (
	_ artifacts.Store       = (*Store)(nil)
	_ artifacts.Merger      = (*Store)(nil)
	_ artifacts.Reverter    = (*Store)(nil)
	_ artifacts.RangeReader = (*Store)(nil)
	_ artifacts.Copier      = (*Store)(nil)
)

// driver opens lakefs:// URIs with a client configured from the environment.
type driver struct{}

func (driver) Open(ctx context.Context, uri string, opts *artifacts.Options) (artifacts.Store, error) {
	c, repo, err := clientFor(uri)
	if err != nil {
		return nil, err
	}
	return Open(ctx, c, repo, opts)
}

func (driver) Create(ctx context.Context, uri string, opts *artifacts.Options) (artifacts.Store, error) {
	c, repo, err := clientFor(uri)
	if err != nil {
		return nil, err
	}
	return Create(ctx, c, repo, opts)
}

// clientFor is the repository a lakefs:// URI names and a client
// configured from the environment.
func clientFor(uri string) (*Client, string, error) {
	repo, err := ParseURI(uri)
	if err != nil {
		return nil, "", err
	}
	c, err := NewClient(ConfigFromEnv())
	if err != nil {
		return nil, "", err
	}
	return c, repo, nil
}

// ParseURI returns the repository a lakefs://<repository> URI names.
func ParseURI(uri string) (string, error) {
	rest, ok := strings.CutPrefix(uri, Scheme+"://")
	if !ok {
		return "", fmt.Errorf("%w: store %q: want lakefs://<repository>", artifacts.ErrInvalid, uri)
	}
	repo := strings.TrimSuffix(rest, "/")
	if strings.Contains(repo, "/") {
		return "", fmt.Errorf("%w: store %q: a lakeFS store is a whole repository, lakefs://<repository>, without a branch or path", artifacts.ErrInvalid, uri)
	}
	if err := artifacts.ValidateRepositoryName(repo); err != nil {
		return "", fmt.Errorf("store %q: %w", uri, err)
	}
	return repo, nil
}

// Store is a lakeFS repository seen through the artifacts contract.
type Store struct {
	c             *Client
	repo          string
	defaultBranch string
}

// Open opens an existing repository on the server c talks to.
func Open(ctx context.Context, c *Client, repo string, opts *artifacts.Options) (*Store, error) {
	if err := artifacts.ValidateRepositoryName(repo); err != nil {
		return nil, err
	}
	if opts != nil {
		c = c.withLogger(opts.Logger.With().Str("store", Scheme+"://"+repo).Logger())
	}
	s := &Store{c: c, repo: repo}
	r, err := s.Repository(ctx)
	if err != nil {
		return nil, err
	}
	s.defaultBranch = r.DefaultBranch
	return s, nil
}

// Create creates a repository and opens it. Its data goes to
// opts.StorageNamespace, else $RLPIPE_LAKEFS_NAMESPACE/<repo>, else
// local://<repo> (the blockstore of a quickstart server).
func Create(ctx context.Context, c *Client, repo string, opts *artifacts.Options) (*Store, error) {
	if err := artifacts.ValidateRepositoryName(repo); err != nil {
		return nil, err
	}
	o := artifacts.ValueOf(opts)
	o.EnsureDefaults()
	if err := artifacts.ValidateBranchName(o.DefaultBranch); err != nil {
		return nil, fmt.Errorf("lakefs: create repository %q: default %w", repo, err)
	}
	ns := o.StorageNamespace
	if ns == "" {
		if prefix := os.Getenv(EnvNamespace); prefix != "" {
			ns = strings.TrimRight(prefix, "/") + "/" + repo
		} else {
			ns = "local://" + repo
		}
	}
	body := lakefsapi.RepositoryCreation{Name: repo, StorageNamespace: ns, DefaultBranch: o.DefaultBranch}
	var r lakefsapi.Repository
	err := c.call(ctx, http.MethodPost, pathOf("repositories"), nil, body, &r)
	if err != nil {
		return nil, c.translate(err, kinds{conflict: artifacts.ErrRepositoryExists},
			fmt.Sprintf("create repository %q in %q", repo, ns))
	}
	return Open(ctx, c, repo, &o)
}

// DeleteRepository deletes a repository and everything in it. The store
// contract has no such operation; tests use it to clean up.
func (c *Client) DeleteRepository(ctx context.Context, repo string) error {
	err := c.call(ctx, http.MethodDelete, pathOf("repositories", repo), nil, nil, nil)
	return c.translate(err, kinds{notFound: artifacts.ErrRepositoryNotFound}, fmt.Sprintf("delete repository %q", repo))
}

// Repository describes the repository.
func (s *Store) Repository(ctx context.Context) (artifacts.Repository, error) {
	var r lakefsapi.Repository
	if err := s.c.call(ctx, http.MethodGet, pathOf("repositories", s.repo), nil, nil, &r); err != nil {
		err = s.c.translate(err, kinds{notFound: artifacts.ErrRepositoryNotFound}, fmt.Sprintf("open repository %q", s.repo))
		if errors.Is(err, artifacts.ErrRepositoryNotFound) {
			err = fmt.Errorf("%w (create it with: rlpipe init-store --store %s://%s)", err, Scheme, s.repo)
		}
		return artifacts.Repository{}, err
	}
	return repositoryFromWire(r), nil
}

// Close releases idle connections. The store must not be used afterwards.
func (s *Store) Close() error {
	s.c.closeIdle()
	return nil
}

// Client returns the client the store sends requests with.
func (s *Store) Client() *Client { return s.c }

// repoPath is the API path of something in the repository.
func (s *Store) repoPath(segments ...string) string {
	return pathOf(append([]string{"repositories", s.repo}, segments...)...)
}
