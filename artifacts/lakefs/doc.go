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
//	RLPIPE_LAKEFS_PRESIGN_THRESHOLD        objects above this size move through
//	                                       presigned URLs: bytes, or 64MiB, or off
//	                                       (default 32MiB; optional)
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
// # Large objects: presigned transfers
//
// An object above Config.PresignThreshold (32 MiB unless
// RLPIPE_LAKEFS_PRESIGN_THRESHOLD says otherwise) moves between the client
// and the server's block store (S3, GCS, Azure Blob) without passing
// through the lakeFS server, as lakectl and lakeFS's own clients move
// large files, when the server offers it: the first such object asks GET
// /config once whether its storage config has pre_sign_support, and the
// answer holds for the life of the client.
//
// An upload asks getPhysicalAddress (GET …/branches/{branch}/staging/
// backing?presign=true) for an address and a presigned URL, PUTs the body
// to the URL, streamed with its Content-Length, then links the address to
// the path (linkPhysicalAddress, PUT on the same path) with the block
// store's ETag, the size, the content type and the user metadata,
// MetaSHA256 included. Only the link stages the object: an upload cut off
// (the process killed, the connection lost) or never linked leaves the
// branch as it was, and the same put again starts afresh (lakeFS's
// garbage collection removes the orphan block). Only bodies PutObject can
// read twice take this way, since the SHA-256 is learnt first and the
// bytes as sent are checked against it (by a CRC-32C taken in the same
// first pass); with PutOptions.IfAbsent a stat refuses
// a taken path before any byte is sent, and the link checks again.
//
// A whole read (GetObject) of such an object stats it again with
// presign=true and GETs the URL given as its physical address; its bytes
// are checked against the recorded SHA-256 as through the API, or, from a
// server whose checksums are SHA-256s (`rlpipe store serve`), against the
// checksum, since they came from a third party. Range
// reads go through the API. An upload is one PUT: S3 refuses one above
// 5 GiB, and such an object then goes through the API (lakeFS's
// presigned multipart uploads are not used).
//
// Everything falls back to the API: a server whose config says no
// pre_sign_support, or that has no GET /config, or whose staging
// endpoints answer 404 or 501 (then remembered), a stat that gives no
// URL, and a transfer the block store refuses or that fails (an expired
// URL, a signature refused, a block store out of reach). The last is
// logged at warn as an ErrPresignedTransfer error naming the object and
// the block store's scheme and host, never the URL's path or query,
// which hold the signature, nor an S3 error body's fields other than its
// Code and Message. A presigned request carries no credentials and is not
// sent again; the API request after it is retried as any other.
//
// # Checksums
//
// lakeFS's checksum of an object is its block store's ETag: the MD5 hex of
// the content on the local block store, other digests elsewhere. The
// embedded store's is the SHA-256 hex, and cache keys and provenance are
// built from ObjectInfo.Checksum. So the store records the SHA-256 of
// what it uploads as user metadata under MetaSHA256 and reports it as the
// checksum of every object that carries it, in the answers of PutObject,
// StatObject, GetObject, ListObjects and CopyObject (lakeFS copies user
// metadata with the object). The same bytes written by rlpipe then have
// the same checksum on lakeFS as in the embedded store, and a run moved
// from one to the other hits its cache. The key is reserved: PutObject
// refuses it in PutOptions.Metadata, and it never appears in
// ObjectInfo.Metadata.
//
// The header goes before the body, so an upload is hashed first, and
// then again as it is sent, only when its body can be read twice: an
// io.Seeker (a file, a bytes.Reader, a strings.Reader) or a bytes.Buffer.
// Every artifact a pipeline writes is such a body. Bytes that differ
// between the two readings (a file rewritten during the upload) fail the
// put with artifacts.ErrIntegrity. A body that can be read once (a pipe,
// standard input) is streamed once, unbuffered, and its object keeps
// lakeFS's checksum, as do objects written by other tools (lakectl, the S3
// gateway) and by rlpipe before the key existed; their cache entries,
// recorded with those checksums, still match. lakeFS's endpoint that
// rewrites an object's user metadata could add the key after such an
// upload, but it is experimental in v1.84.0 and takes no precondition, so
// it could stamp one writer's digest on another writer's bytes; the store
// does not use it.
//
// GetObject checks a whole read of an object that carries the key
// against it: the last Read returns artifacts.ErrIntegrity instead of
// io.EOF when the bytes differ (a tool changed them and kept the key, or a
// put failed as above), as the embedded store's reads do; its message
// says what to do on lakeFS (write the object again, or revert the commit
// that wrote it) and that `rlpipe fsck` lists the rest.
//
// # Verify
//
// Store implements artifacts.Verifier (`rlpipe fsck`) through the API:
// it walks the history of every branch and tag (one GET per commit, each
// commit's objects listed) and the staged changes of every branch, reads
// each object version (physical address and checksums) once, whole, and
// compares its length with its recorded size and its SHA-256 with the one
// recorded under MetaSHA256. An object lakeFS will not serve (404, 410,
// 5xx) is damage too. What the API cannot show is said in
// VerifyResult.Limits rather than passed over: lakeFS's trees (metaranges
// and ranges) are not readable through it (LimitTrees), and an object
// without a recorded SHA-256 is read but not compared (counted in
// VerifyResult.Unchecked): its checksum is a block-store ETag the client
// cannot recompute in general (an MD5 on the local block store, something
// else for S3 multipart or encrypted uploads). VerifyOptions.Quick asks
// for each object's last byte instead (LimitQuick).
//
// # Not supported
//
//   - Garbage collection (artifacts.Collector): lakeFS runs its own; the
//     store does not implement the interface and the CLI reports
//     artifacts.ErrNotSupported.
//   - CommitOptions.Committer and MergeOptions.Committer/Date: the server
//     records its authenticated user and its own clock. CommitOptions.Date
//     is honoured for Commit.
//   - Digest verification of range reads, and of whole reads of objects
//     without a recorded SHA-256: lakeFS checks its stored data itself.
//     Verify says so in VerifyResult.Limits.
//   - Deleting a repository through the contract; Client.DeleteRepository
//     exists for tests.
package lakefs
