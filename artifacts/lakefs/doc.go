// Package lakefs is the lakeFS backend of the artifact store: a Store that
// keeps artifacts in a repository on a lakeFS server, spoken to over its
// REST API (v1) with a small hand-written client.
//
// Import it for its side effect and open a store by URI:
//
//	import _ "github.com/rlpipe/rlpipe/artifacts/lakefs"
//
//	st, err := artifacts.Open(ctx, "lakefs://my-repo", nil)
//
// The URI names a whole repository, lakefs://<repository>; branches, tags
// and paths are arguments of the store's methods, not part of the URI.
//
// # Configuration
//
// The server and the credentials come from lakectl's environment
// variables, so a machine set up for lakectl needs nothing more:
//
//	LAKECTL_SERVER_ENDPOINT_URL            http://localhost:8000 (with or without /api/v1)
//	LAKECTL_CREDENTIALS_ACCESS_KEY_ID      access key id  (HTTP Basic auth)
//	LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY  secret access key
//	RLPIPE_LAKEFS_NAMESPACE                where new repositories keep their data,
//	                                       e.g. s3://bucket/rlpipe (optional)
//
// Credentials are sent only in the Authorization header; they never appear
// in errors or logs. To configure in code instead, build a Client with
// NewClient and call Open or Create.
//
// Creating a repository (artifacts.Create, `rlpipe init-store --store
// lakefs://<repo>`) stores its data under Options.StorageNamespace, else
// $RLPIPE_LAKEFS_NAMESPACE/<repo>, else local://<repo>, which suits the
// quickstart server whose blockstore is local.
//
// # Behaviour
//
// The Store implements artifacts.Store, artifacts.Merger,
// artifacts.Reverter and artifacts.RangeReader. Ref expressions (~N, ^N,
// branch@, commit-id prefixes) are validated here and resolved by the
// server (GET /commits/{ref}); the commit log accepts only refs shaped like
// a branch name, so Log resolves any other ref to its commit id first. Objects stream in both directions: PutObject sends the reader as
// the request body and GetObject returns the response body, so memory use
// does not grow with object size. Object metadata travels as
// X-Lakefs-Meta-* headers; keys come back lower-case.
//
// Server answers become the named errors of package artifacts (a 404 from
// GetBranch is artifacts.ErrBranchNotFound, a 409 from a merge a
// *artifacts.MergeConflictError listing the conflicting paths, a 409 from
// CreateTag saying a branch holds the name artifacts.ErrBranchExists), and
// every error says what was being done and what the server said.
//
// CopyObject asks the server for a full copy, within one branch too:
// lakeFS v1.84.0 refuses every shallow copy with 501.
//
// # Not supported
//
//   - Garbage collection (artifacts.Collector): lakeFS runs its own; the
//     store does not implement the interface and the CLI reports
//     artifacts.ErrNotSupported.
//   - CommitOptions.Committer and MergeOptions.Committer/Date: the server
//     records its authenticated user and its own clock. CommitOptions.Date
//     is honoured for Commit.
//   - Digest verification on read: lakeFS checks its stored data itself and
//     reports its own checksum (an MD5 or an ETag) in ObjectInfo.Checksum.
//   - Deleting a repository through the contract; Client.DeleteRepository
//     exists for tests.
package lakefs
