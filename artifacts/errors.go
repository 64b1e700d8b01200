package artifacts

import "errors"

// Errors returned by every backend. Backends wrap these (with %w) so that
// callers test with errors.Is; the more specific errors wrap the general
// ones, e.g. ErrBranchNotFound wraps ErrNotFound.
var (
	// ErrNotFound: a repository, ref, commit, tag, branch or object does not exist.
	ErrNotFound = errors.New("not found")
	// ErrRepositoryNotFound: the store URI names no repository; create it with `rlpipe init-store`.
	ErrRepositoryNotFound = NamedError("repository not found", ErrNotFound)
	// ErrRefNotFound: a ref expression names nothing.
	ErrRefNotFound = NamedError("ref not found", ErrNotFound)
	// ErrBranchNotFound: the named branch does not exist.
	ErrBranchNotFound = NamedError("branch not found", ErrRefNotFound)
	// ErrTagNotFound: the named tag does not exist.
	ErrTagNotFound = NamedError("tag not found", ErrRefNotFound)
	// ErrCommitNotFound: no commit has that id.
	ErrCommitNotFound = NamedError("commit not found", ErrRefNotFound)
	// ErrObjectNotFound: no object at that path in that ref.
	ErrObjectNotFound = NamedError("object not found", ErrNotFound)

	// ErrExists: the thing being created is already there.
	ErrExists = errors.New("already exists")
	// ErrRepositoryExists: the repository was already created.
	ErrRepositoryExists = NamedError("repository exists", ErrExists)
	// ErrBranchExists: a branch with that name exists. CreateTag returns
	// it too: a tag may not take a branch's name, as on lakeFS.
	ErrBranchExists = NamedError("branch exists", ErrExists)
	// ErrTagExists: a tag with that name exists. CreateBranch returns it
	// too: a branch may not take a tag's name, as on lakeFS.
	ErrTagExists = NamedError("tag exists", ErrExists)
	// ErrObjectExists: PutOptions.IfAbsent was set and the path holds an object.
	ErrObjectExists = NamedError("object exists", ErrExists)

	// ErrInvalid: an argument is malformed (a ref expression, a path, a name).
	ErrInvalid = errors.New("invalid argument")
	// ErrInvalidRef: a ref expression does not parse.
	ErrInvalidRef = NamedError("invalid ref", ErrInvalid)
	// ErrAmbiguousRef: a commit-id prefix matches more than one commit.
	ErrAmbiguousRef = NamedError("ambiguous ref", ErrInvalid)
	// ErrReadOnlyRef: a write was addressed to a ref that is not a branch.
	ErrReadOnlyRef = NamedError("ref is not a branch", ErrInvalid)

	// ErrConflict: the operation cannot proceed in the current state.
	ErrConflict = errors.New("conflict")
	// ErrMergeConflict: the same path changed differently on both sides of
	// a merge; the error is a *MergeConflictError listing the paths.
	ErrMergeConflict = NamedError("merge conflict", ErrConflict)
	// ErrDirtyBranch: the branch has uncommitted changes where a clean one is
	// required (merge into it, revert on it).
	ErrDirtyBranch = NamedError("branch has uncommitted changes", ErrConflict)
	// ErrNoChanges: a commit or merge would record nothing.
	ErrNoChanges = NamedError("no changes", ErrConflict)
	// ErrConcurrentUpdate: another writer moved the branch first; retry.
	ErrConcurrentUpdate = NamedError("branch moved concurrently", ErrConflict)
	// ErrProtected: the branch is the repository's default branch and cannot be deleted.
	ErrProtected = NamedError("protected", ErrConflict)

	// ErrIntegrity: stored bytes do not match their recorded digest. Data
	// that fails this check is never returned as valid.
	ErrIntegrity = errors.New("integrity check failed")

	// ErrNotSupported: the backend cannot do this (e.g. garbage collection on
	// a lakeFS server, which runs its own).
	ErrNotSupported = errors.New("not supported")

	// ErrUnauthorized: the server refused the credentials.
	ErrUnauthorized = errors.New("unauthorized")
)

// NamedError returns an error whose message is msg and which wraps
// parent, so that errors.Is finds both: how a package names the leaves of
// its %w hierarchy (tables.ErrSchemaMismatch wraps ErrInvalid).
func NamedError(msg string, parent error) error { return &kindError{msg: msg, parent: parent} }

// kindError is a named error that wraps a more general one.
type kindError struct {
	msg    string
	parent error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.parent }

// MergeConflictError lists the paths that changed differently on both sides.
// It matches ErrMergeConflict with errors.Is.
type MergeConflictError struct {
	Source, Destination string
	Paths               []string
}

func (e *MergeConflictError) Error() string {
	const show = 10
	msg := "merge " + e.Source + " into " + e.Destination + ": conflict in "
	for i, p := range e.Paths {
		if i == show {
			msg += ", …"
			break
		}
		if i > 0 {
			msg += ", "
		}
		msg += p
	}
	return msg + " (retry with strategy source-wins or dest-wins, or change one side)"
}

func (e *MergeConflictError) Unwrap() error { return ErrMergeConflict }
