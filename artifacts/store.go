package artifacts

import (
	"context"
	"io"
	"iter"
	"time"
)

// Store is one repository of versioned artifacts: branches with staged
// changes, immutable commits, tags, and objects addressed by ref and path.
// Every backend implements it; extra abilities (Merger, Reverter,
// Collector, Verifier, RangeReader) are separate interfaces found by type
// assertion.
//
// A ref argument is any ref expression (see ParseRef): a branch, a tag, a
// commit id or unique prefix, followed by ~N / ^N, or a branch with @ (its
// last commit only). Reading a branch sees its staged changes; writing
// requires a branch.
type Store interface {
	// Repository describes the repository this store opened.
	Repository(ctx context.Context) (Repository, error)

	// CreateBranch creates branch name at the commit that from resolves to.
	// It copies no data. Branches and tags share one namespace, as on
	// lakeFS: a name a branch holds is ErrBranchExists, a name a tag
	// holds ErrTagExists.
	CreateBranch(ctx context.Context, name, from string) (Branch, error)
	// GetBranch returns the branch and its head commit.
	GetBranch(ctx context.Context, name string) (Branch, error)
	// ListBranches lists branches in name order.
	ListBranches(ctx context.Context) iter.Seq2[Branch, error]
	// DeleteBranch deletes a branch and its staged changes. The default
	// branch cannot be deleted.
	DeleteBranch(ctx context.Context, name string) error
	// ResetBranch discards staged changes under prefix ("" means all).
	ResetBranch(ctx context.Context, name, prefix string) error

	// CreateTag points tag name at the commit ref resolves to. A name a
	// tag holds is ErrTagExists, a name a branch holds ErrBranchExists.
	CreateTag(ctx context.Context, name, ref string) (Tag, error)
	// GetTag returns a tag.
	GetTag(ctx context.Context, name string) (Tag, error)
	// ListTags lists tags in name order.
	ListTags(ctx context.Context) iter.Seq2[Tag, error]
	// DeleteTag deletes a tag.
	DeleteTag(ctx context.Context, name string) error

	// ResolveRef returns the commit a ref expression names. A branch
	// resolves to its head commit (staged changes are not part of a commit).
	ResolveRef(ctx context.Context, ref string) (Commit, error)
	// GetCommit returns a commit by its full id.
	GetCommit(ctx context.Context, id string) (Commit, error)
	// Commit records the branch's staged changes as a new commit whose
	// parent is the branch head. It fails with ErrNoChanges when nothing is
	// staged unless opts.AllowEmpty.
	Commit(ctx context.Context, branch, message string, opts *CommitOptions) (Commit, error)
	// Log walks history from ref, newest first.
	Log(ctx context.Context, ref string, opts *LogOptions) iter.Seq2[Commit, error]

	// PutObject stages an object on a branch, streaming r.
	PutObject(ctx context.Context, branch, path string, r io.Reader, opts *PutOptions) (ObjectInfo, error)
	// GetObject opens an object for reading. Content is verified against
	// the stored digest: a mismatch is ErrIntegrity, from GetObject or
	// from a Read (instead of io.EOF). The embedded store hands out no byte
	// that fails the check; a streaming backend may hand out a prefix
	// before its last Read fails.
	GetObject(ctx context.Context, ref, path string) (io.ReadCloser, ObjectInfo, error)
	// StatObject describes an object without reading it.
	StatObject(ctx context.Context, ref, path string) (ObjectInfo, error)
	// ListObjects lists objects under opts.Prefix in path order; with a
	// Delimiter, paths that continue past it are folded into common
	// prefixes (Entry.CommonPrefix).
	ListObjects(ctx context.Context, ref string, opts *ListOptions) iter.Seq2[Entry, error]
	// DeleteObject stages the removal of an object.
	DeleteObject(ctx context.Context, branch, path string) error

	// Diff lists changes between two refs. Two-dot compares left and right
	// directly; three-dot (the default, as in lakeFS) lists what right
	// changed since the merge base of the two.
	Diff(ctx context.Context, left, right string, opts *DiffOptions) iter.Seq2[Change, error]
	// DiffUncommitted lists a branch's staged changes against its head.
	DiffUncommitted(ctx context.Context, branch string) iter.Seq2[Change, error]

	// Close releases the store's resources.
	Close() error
}

// Merger merges one ref into a branch with a three-way merge.
type Merger interface {
	// Merge merges source into destination branch. It fails with
	// ErrDirtyBranch if destination has staged changes, with a
	// *MergeConflictError listing paths changed differently on both sides
	// (unless opts.Strategy picks a side), and with ErrNoChanges when
	// source brings nothing unless opts.AllowEmpty.
	Merge(ctx context.Context, source, destination string, opts *MergeOptions) (Commit, error)
	// MergeBase returns the best common ancestor of two refs.
	MergeBase(ctx context.Context, left, right string) (Commit, error)
}

// Reverter undoes a commit on a branch by committing its inverse.
type Reverter interface {
	// Revert commits the inverse of the commit ref names onto branch. For a
	// merge commit, parentNumber (1-based) picks the parent to diff against;
	// 0 means 1.
	Revert(ctx context.Context, branch, ref string, parentNumber int, opts *CommitOptions) (Commit, error)
}

// Collector removes data no branch, tag or staged change can reach.
type Collector interface {
	GC(ctx context.Context, opts *GCOptions) (GCResult, error)
}

// RangeReader reads part of an object; table readers use it to read
// Parquet footers and row groups without fetching whole files.
type RangeReader interface {
	// GetObjectRange returns length bytes from offset (length < 0 means to
	// the end). Partial reads are not digest-verified; verify with a full
	// GetObject when that matters.
	GetObjectRange(ctx context.Context, ref, path string, offset, length int64) (io.ReadCloser, error)
}

// Copier links an object under a new path without copying its bytes: the
// cache reuses a task's outputs this way.
type Copier interface {
	// CopyObject stages at dstBranch:dstPath the object srcRef:srcPath.
	CopyObject(ctx context.Context, srcRef, srcPath, dstBranch, dstPath string) (ObjectInfo, error)
}

// MultiCopier stages several links in one step, all or none: an
// iteration's commit moves every output of its work branch this way. A
// store that has it makes the links durable together, where CopyObject
// would sync once per object.
type MultiCopier interface {
	// CopyObjects stages at dstBranch:p the object srcRef:p for every p
	// of paths, in one step, and returns their infos in the order of
	// paths. A path missing at srcRef stages none of them and fails with
	// ErrObjectNotFound naming it.
	CopyObjects(ctx context.Context, srcRef, dstBranch string, paths []string) ([]ObjectInfo, error)
}

// MultiPutter stages several objects in one step, all or none: a task's
// outputs are uploaded this way. A store that has it makes their records
// durable together, where PutObject would sync once per object.
type MultiPutter interface {
	// PutObjects stages every put on branch and returns their infos in
	// order. A put that fails stages none of them; the error names its
	// path. The bodies may be read concurrently, each on its own
	// goroutine, so no two puts may share a reader.
	PutObjects(ctx context.Context, branch string, puts []Put) ([]ObjectInfo, error)
}

// Put is one object of PutObjects: its path, bytes and options (nil
// for the defaults).
type Put struct {
	Path    string
	Body    io.Reader
	Options *PutOptions
}

// Repository describes a repository.
type Repository struct {
	Name             string    `json:"name"`
	DefaultBranch    string    `json:"default_branch"`
	StorageNamespace string    `json:"storage_namespace,omitempty"`
	CreatedAt        time.Time `json:"created_at"`
}

// Branch is a named, movable pointer to a commit plus its staged changes.
type Branch struct {
	Name     string `json:"name"`
	CommitID string `json:"commit_id"`
}

// Tag is a named, immutable pointer to a commit.
type Tag struct {
	Name     string `json:"name"`
	CommitID string `json:"commit_id"`
}

// Commit is an immutable snapshot of a repository.
type Commit struct {
	ID           string            `json:"id"`
	Parents      []string          `json:"parents"`
	Committer    string            `json:"committer"`
	Message      string            `json:"message"`
	CreationDate time.Time         `json:"creation_date"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	MetaRangeID  string            `json:"meta_range_id,omitempty"`
	Generation   int               `json:"generation,omitempty"`
}

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	Path string `json:"path"`
	Size int64  `json:"size_bytes"`
	// Checksum is derived from the content alone. The embedded store uses
	// SHA-256 hex. The lakeFS backend reports the SHA-256 hex it recorded
	// when it wrote the object (lakefs.MetaSHA256), so that an object
	// rlpipe wrote has the same checksum on both backends; an object it
	// could not hash before sending it (from a body that can be read only
	// once) or that another tool wrote keeps lakeFS's own checksum (an MD5
	// or ETag). Identical bytes thus have one checksum on the embedded
	// store, and on lakeFS one per way they were written: comparing
	// checksums can miss equal content there, never take different
	// content for equal.
	Checksum    string            `json:"checksum"`
	Mtime       time.Time         `json:"mtime"`
	ContentType string            `json:"content_type,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
}

// Entry is one row of a listing: an object, or with a delimiter, a common
// prefix standing for everything below it.
type Entry struct {
	ObjectInfo
	CommonPrefix bool `json:"common_prefix,omitempty"`
}

// ChangeType says how a path differs between two sides of a diff.
type ChangeType string

// Change types.
const (
	ChangeAdded    ChangeType = "added"
	ChangeRemoved  ChangeType = "removed"
	ChangeModified ChangeType = "changed"
)

// Change is one path that differs between two sides.
type Change struct {
	Type ChangeType `json:"type"`
	Path string     `json:"path"`
	Size int64      `json:"size_bytes,omitempty"`
}

// PutOptions tune PutObject. Nil means defaults.
type PutOptions struct {
	ContentType string
	// Metadata is user metadata stored with the object (provenance lives
	// here, see Provenance). Keys are lower-case ASCII.
	Metadata map[string]string
	// IfAbsent fails with ErrObjectExists if the path already holds an object.
	IfAbsent bool
}

// CommitOptions tune Commit, Merge and Revert. Nil means defaults.
type CommitOptions struct {
	Metadata   map[string]string
	AllowEmpty bool
	// Committer overrides the committer name (default: the backend's user).
	Committer string
	// Date fixes the commit date (deterministic tests); zero means now.
	// Backends that set the date themselves (lakeFS) may ignore it.
	Date time.Time
}

// LogOptions filter Log. Nil means all commits reachable from the ref.
type LogOptions struct {
	// Limit stops after this many commits (0: no limit).
	Limit int
	// FirstParent follows only first parents.
	FirstParent bool
	// Paths keeps only commits that changed one of these exact paths, and
	// Prefixes those that changed something under one of these prefixes;
	// both compare a commit with its first parent.
	Paths    []string
	Prefixes []string
}

// ListOptions filter ListObjects. Nil means everything.
type ListOptions struct {
	Prefix    string
	Delimiter string
	// After starts the listing after this path (exclusive).
	After string
	// Limit stops after this many entries (0: no limit).
	Limit int
}

// DiffOptions tune Diff. Nil means a three-dot diff of everything.
type DiffOptions struct {
	TwoDot bool
	Prefix string
}

// MergeStrategy resolves conflicts in a merge.
type MergeStrategy string

// Merge strategies, named as in lakeFS.
const (
	StrategyNone       MergeStrategy = ""
	StrategySourceWins MergeStrategy = "source-wins"
	StrategyDestWins   MergeStrategy = "dest-wins"
)

// MergeOptions tune Merge. Nil means defaults.
type MergeOptions struct {
	Message    string
	Metadata   map[string]string
	Strategy   MergeStrategy
	AllowEmpty bool
	Committer  string
	Date       time.Time
}

// GCOptions tune garbage collection. Nil means defaults.
type GCOptions struct {
	// GracePeriod keeps blobs younger than this even when unreferenced, so
	// a collection never races an upload that has not been staged yet.
	// Zero means the default of one hour; negative means none.
	GracePeriod time.Duration
	// DryRun reports what would be removed without removing it.
	DryRun bool
}

// GCResult reports what a collection removed (or would remove).
type GCResult struct {
	CommitsRemoved int   `json:"commits_removed"`
	BlobsRemoved   int   `json:"blobs_removed"`
	BytesRemoved   int64 `json:"bytes_removed"`
	BlobsKept      int   `json:"blobs_kept"`
}
