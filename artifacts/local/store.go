package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"github.com/rlpipe/rlpipe/artifacts"
)

// Layout of a store directory.
const (
	dbFile   = "meta.db"
	blobsDir = "blobs"
	tmpDir   = "tmp"
)

var (
	bucketRepo       = []byte("repository")
	bucketBranches   = []byte("branches")
	bucketTags       = []byte("tags")
	bucketCommits    = []byte("commits")
	bucketRanges     = []byte("ranges")
	bucketMetaRanges = []byte("metaranges")
	bucketStaging    = []byte("staging") // one nested bucket per branch
	keyRepoInfo      = []byte("info")
)

// errCorruptMeta marks metadata that references something missing.
var errCorruptMeta = fmt.Errorf("%w: store metadata", artifacts.ErrIntegrity)

// Options tune the embedded store. Nil means defaults.
type Options struct {
	// LockTimeout bounds the wait for another process's transaction (the
	// metadata file is locked only for the duration of one operation).
	// Zero means one minute.
	LockTimeout time.Duration
	// Logger receives debug lines.
	Logger zerolog.Logger
}

func (o *Options) ensureDefaults() {
	if o.LockTimeout == 0 {
		o.LockTimeout = time.Minute
	}
}

// Store is the embedded backend: blobs on the file system, metadata in a
// bbolt file. It is safe for concurrent use by goroutines and by processes.
type Store struct {
	root  string
	opts  Options
	blobs *blobStore
	cache *treeCache
	heads headCache

	// The bbolt file is opened per operation and shared by the operations
	// of this process that overlap, so that other processes (a CLI reading
	// a running pipeline's store) get their turn between them. It stays
	// open lingerIdle after the last operation ends, unless it has been
	// open longer than lingerMax (see release).
	mu     sync.Mutex
	db     *bolt.DB
	users  int
	closed bool
	opened time.Time   // when db was opened
	idle   *time.Timer // closes db after lingerIdle without operations
	gen    int         // counts acquisitions, so a stale idle timer closes nothing
}

// Opening the metadata file costs a flock, an mmap, reading the free
// list and faulting in the pages each read touches again: hundreds of
// microseconds on a large store, more than the read it serves. A command
// that reads thousands of small objects one after the other (`rlpipe
// status` of a long run) would reopen it for each. So the file stays open
// for lingerIdle after an operation, for the next one to reuse; but once
// it has been open for lingerMax it is closed as soon as no operation
// holds it, as before, so other processes still get their turn.
const (
	lingerIdle = 500 * time.Microsecond
	lingerMax  = 100 * time.Millisecond
)

var (
	_ artifacts.Store       = (*Store)(nil)
	_ artifacts.Merger      = (*Store)(nil)
	_ artifacts.Reverter    = (*Store)(nil)
	_ artifacts.Collector   = (*Store)(nil)
	_ artifacts.Verifier    = (*Store)(nil)
	_ artifacts.RangeReader = (*Store)(nil)
	_ artifacts.Copier      = (*Store)(nil)
	_ artifacts.MultiCopier = (*Store)(nil)
	_ artifacts.MultiPutter = (*Store)(nil)
)

type driver struct{}

func init() { artifacts.Register("file", driver{}) }

func dirOf(uri string) string { return strings.TrimPrefix(uri, "file://") }

func (driver) Open(ctx context.Context, uri string, o *artifacts.Options) (artifacts.Store, error) {
	return Open(ctx, dirOf(uri), &Options{Logger: o.Logger})
}

func (driver) Create(ctx context.Context, uri string, o *artifacts.Options) (artifacts.Store, error) {
	return Create(ctx, dirOf(uri), o.DefaultBranch, &Options{Logger: o.Logger})
}

// Open opens the store in dir; artifacts.ErrRepositoryNotFound if there is none.
func Open(ctx context.Context, dir string, opts *Options) (*Store, error) {
	if _, err := os.Stat(filepath.Join(dir, dbFile)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("open store %s: %w: run `rlpipe init-store --store %s`", dir, artifacts.ErrRepositoryNotFound, dir)
		}
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	s := newStore(dir, opts)
	if _, err := s.Repository(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Create makes a new store in dir with one branch holding an empty initial
// commit; artifacts.ErrRepositoryExists if dir already holds one.
func Create(ctx context.Context, dir, defaultBranch string, opts *Options) (*Store, error) {
	if defaultBranch == "" {
		defaultBranch = "main"
	}
	if err := artifacts.ValidateBranchName(defaultBranch); err != nil {
		return nil, fmt.Errorf("create store %s: %w", dir, err)
	}
	for _, d := range []string{dir, filepath.Join(dir, blobsDir), filepath.Join(dir, tmpDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create store %s: %w", dir, err)
		}
	}
	s := newStore(dir, opts)
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	err = s.update(ctx, func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketRepo, bucketBranches, bucketTags, bucketCommits, bucketRanges, bucketMetaRanges, bucketStaging, bucketInline} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if tx.Bucket(bucketRepo).Get(keyRepoInfo) != nil {
			return fmt.Errorf("create store %s: %w", dir, artifacts.ErrRepositoryExists)
		}
		now := time.Now().UTC().Truncate(time.Second)
		info := artifacts.Repository{Name: filepath.Base(abs), DefaultBranch: defaultBranch, StorageNamespace: "file://" + abs, CreatedAt: now}
		if err := putJSON(tx.Bucket(bucketRepo), keyRepoInfo, info); err != nil {
			return err
		}
		c := artifacts.Commit{Committer: s.committer(""), Message: "Repository created", CreationDate: now, MetaRangeID: emptyMetaRangeID, Generation: 1}
		id, err := commitID(c)
		if err != nil {
			return err
		}
		c.ID = id
		if err := putJSON(tx.Bucket(bucketCommits), []byte(c.ID), c); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bucketBranches), []byte(defaultBranch), artifacts.Branch{Name: defaultBranch, CommitID: c.ID})
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func newStore(dir string, opts *Options) *Store {
	o := artifacts.ValueOf(opts)
	o.ensureDefaults()
	return &Store{root: dir, opts: o, blobs: &blobStore{root: filepath.Join(dir, blobsDir), tmp: filepath.Join(dir, tmpDir)}, cache: newTreeCache()}
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.root }

// acquire opens the metadata file (or shares this process's open handle).
func (s *Store) acquire(ctx context.Context) (*bolt.DB, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("store %s: %w: closed", s.root, artifacts.ErrInvalid)
	}
	s.gen++
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	if s.db == nil {
		db, err := bolt.Open(filepath.Join(s.root, dbFile), 0o644, &bolt.Options{Timeout: s.opts.LockTimeout})
		if err != nil {
			return nil, fmt.Errorf("open store metadata %s: %w (another process may hold it: wait for it or raise the lock timeout)", filepath.Join(s.root, dbFile), err)
		}
		// Batched staging writes wait this long for company; sequential
		// writers pay it once per write.
		db.MaxBatchDelay = 2 * time.Millisecond
		s.db, s.opened = db, time.Now()
	}
	s.users++
	return s.db, nil
}

func (s *Store) release() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users--
	if s.users > 0 || s.db == nil {
		return nil
	}
	if s.closed || time.Since(s.opened) > lingerMax {
		return s.closeDB()
	}
	gen := s.gen
	s.idle = time.AfterFunc(lingerIdle, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.gen == gen && s.users == 0 && s.db != nil {
			s.idle = nil
			if err := s.closeDB(); err != nil {
				s.opts.Logger.Debug().Err(err).Str("store", s.root).Msg("close the idle metadata file")
			}
		}
	})
	return nil
}

// closeDB closes the metadata file; s.mu is held.
func (s *Store) closeDB() error {
	db := s.db
	s.db = nil
	return db.Close()
}

// withDB runs fn on the open database, holding the store's use of it
// for the call; a release error joins fn's.
func (s *Store) withDB(ctx context.Context, fn func(db *bolt.DB) error) (err error) {
	db, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.release()) }()
	return fn(db)
}

func (s *Store) view(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	return s.withDB(ctx, func(db *bolt.DB) error { return db.View(fn) })
}

func (s *Store) update(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	return s.withDB(ctx, func(db *bolt.DB) error { return db.Update(fn) })
}

// viewGet returns what get reads in one read transaction.
func viewGet[T any](s *Store, ctx context.Context, get func(tx *bolt.Tx) (T, error)) (T, error) {
	var v T
	err := s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		v, err = get(tx)
		return err
	})
	return v, err
}

// batch is update for small independent writes (staging one object):
// when other operations of this process are in flight, concurrent calls
// share one transaction and one fsync; a lone writer does not wait for
// company.
func (s *Store) batch(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	return s.withDB(ctx, func(db *bolt.DB) error {
		s.mu.Lock()
		alone := s.users == 1
		s.mu.Unlock()
		if alone {
			return db.Update(fn)
		}
		return db.Batch(fn)
	})
}

func (s *Store) trees(tx *bolt.Tx) trees { return trees{tx: tx, cache: s.cache} }

// Close marks the store closed; later calls fail.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	if s.users == 0 && s.db != nil {
		return s.closeDB()
	}
	return nil
}

// Repository describes the store.
func (s *Store) Repository(ctx context.Context) (artifacts.Repository, error) {
	return viewGet(s, ctx, repoInfo)
}

func repoInfo(tx *bolt.Tx) (artifacts.Repository, error) {
	var r artifacts.Repository
	b := tx.Bucket(bucketRepo)
	if b == nil || b.Get(keyRepoInfo) == nil {
		return r, fmt.Errorf("%w: the metadata file has no repository record", artifacts.ErrRepositoryNotFound)
	}
	return r, json.Unmarshal(b.Get(keyRepoInfo), &r)
}

func (s *Store) committer(override string) string {
	if override != "" {
		return override
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "rlpipe"
}

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, data)
}

func getJSON(b *bolt.Bucket, key []byte, v any) (bool, error) {
	data := b.Get(key)
	if data == nil {
		return false, nil
	}
	return true, json.Unmarshal(data, v)
}
