// Package storeserver serves any artifacts.Store over the part of the
// lakeFS REST API (v1) that rlpipe's own lakefs:// backend speaks, so that
// several processes — pipeline workers on one machine or on a LAN — share
// one embedded store through the backend they already have.
//
// One process opens the store and serves it:
//
//	st, err := artifacts.Open(ctx, "./.rlpipe", nil)
//	srv, err := storeserver.New(ctx, st, &storeserver.Options{
//		Addr:            "0.0.0.0:8001",
//		AccessKeyID:     os.Getenv(storeserver.EnvAccessKeyID),
//		SecretAccessKey: os.Getenv(storeserver.EnvSecretAccessKey),
//	})
//	l, err := srv.Listen(ctx)
//	err = srv.Serve(ctx, l) // until ctx ends
//
// (`rlpipe store serve` does exactly this.) Workers open it as a lakeFS
// repository, with lakectl's variables naming the server:
//
//	LAKECTL_SERVER_ENDPOINT_URL=http://HOST:8001
//	LAKECTL_CREDENTIALS_ACCESS_KEY_ID=<the server's access key id>
//	LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY=<the server's secret>
//	RLPIPE_STORE=lakefs://<Server.Repository()>
//
// A Server is also a plain http.Handler, for tests (httptest.NewServer)
// or to mount behind a server of one's own.
//
// # What is served
//
// The store is one repository, named by Options.Repository or else the
// store's own name; any other repository name is answered 404. The
// endpoints are those the lakefs:// backend sends
// (artifacts/lakefs/stub_test.go lists them), in the OpenAPI document's
// shapes: repositories (get; create and delete only refuse), branches
// (create, get, list, delete, reset), tags, commits (get by any ref
// expression, create, log), objects (upload, download with HEAD and
// single Range requests, stat, list, delete, copy), diffs of two refs and
// of a branch's staged changes, merge and merge base, revert, the
// storage configuration (GET /api/v1/config), staging (see Presigned
// transfers), and GET /api/v1/healthcheck, which needs no credentials.
//
// Objects stream in both directions: an upload's body is the reader
// Store.PutObject consumes, and a download copies the store's reader to
// the connection, so memory does not grow with object size. A download
// holds back its last byte until the store's reader has ended cleanly:
// when the embedded store finds a digest mismatch at the end of a large
// object, the connection is cut and the client gets an error, never a
// complete-looking body. Checksums are the store's own (SHA-256 for the
// embedded store), in ObjectStats and as the ETag, so an artifact has the
// same checksum whether a pipeline reads the store directly or through
// the server. User metadata arrives as X-Lakefs-Meta-* headers and is
// returned lower-cased in ObjectStats.metadata, except the SHA-256 the
// lakefs:// backend records for lakeFS servers (lakefs.MetaSHA256), which
// the store's checksum already is: it is neither stored nor reported. An
// upload's Content-Type becomes the object's, except
// application/octet-stream, which the lakefs:// backend sends for an
// object put without one: it is stored as none, as a direct put stores
// it. Identical bytes written either way are thus one object version to
// diff and merge.
//
// For tests, Faults.MD5Checksums reports checksums as lakeFS's local
// block store does (the MD5 hex of the content) and keeps
// lakefs.MetaSHA256 as lakeFS keeps it, and Faults.MissStagedOnce misses
// reads of staged objects as lakeFS does when they race a commit.
//
// Merge, merge base, revert and copy use the store's artifacts.Merger,
// artifacts.Reverter and artifacts.Copier; a store without one is answered
// 501 with lakeFS's error body. Range requests use artifacts.RangeReader
// when the store has it and otherwise send the whole object, as HTTP
// allows. Resetting a single object (reset type "object"), squash merges,
// a message override on revert and creating or deleting repositories are
// answered 501 too, and so is a shallow copy (shallow: true), as lakeFS
// v1.84.0 answers it, so that a client relying on one fails here as it
// would there.
//
// # Errors
//
// Errors of the store are answered with lakeFS's status and a {"message"}
// body holding the words the lakefs:// backend reads to name the error
// again: a missing branch is 404 "branch not found" (ErrBranchNotFound), a
// missing object 404 "object not found" (ErrObjectNotFound), an empty
// commit 400 "no changes" (ErrNoChanges), staged changes in the way 409
// "branch has uncommitted changes" (ErrDirtyBranch), a merge conflict 409
// (a *MergeConflictError, whose paths the backend recomputes), a lost
// branch update 429 (ErrConcurrentUpdate), an existing object under
// If-None-Match: * 412 (ErrObjectExists), a write to a tag 404 "branch not
// found", which the backend turns into ErrReadOnlyRef as the store does,
// and a tag named like a branch or a branch named like a tag 409 in
// lakeFS's words ("branch name X: conflict found", "tag ID X: conflict
// found"), which the backend reads as ErrBranchExists or ErrTagExists.
// Otherwise the message is the store's own, naming the artifact and the
// next step, led by those words when it lacks them (and left out when its
// words would make the backend read another error).
// A request the server cannot read is 400 (a malformed JSON body names the
// byte where parsing stopped, an invalid branch name is refused before the
// store is asked), an unknown endpoint 404 naming the method and path.
//
// # Faults, for tests
//
// Options.Faults makes the server misbehave as a real lakeFS server can,
// so that clients are tested against what they will meet:
// Faults.CommitWindow holds every commit open for a while and answers 404
// for reads of the objects it is committing (lakeFS's read racing a
// commit, widened from an instant to a window), Faults.MissStagedOnce
// answers the first read of every staged object with 404 (the same race's
// worst case, made deterministic). `rlpipe store serve --faults` (a
// hidden flag) turns them on; ParseFaults reads its value. The 501 for
// shallow copies and the 409 for name clashes are not faults: the server
// always answers them as lakeFS does.
//
// # Presigned transfers
//
// With Options.BlockStore the server offers what lakeFS over S3 offers
// for large objects: GET /api/v1/config says pre_sign_support: true,
// getPhysicalAddress (GET …/branches/{branch}/staging/backing) hands out
// a block://<id> address and, with presign=true, a URL to upload it to,
// linkPhysicalAddress (PUT on the same path) stages the uploaded block at
// the path, and a stat with presign=true answers a URL that reads the
// object as its physical_address (with physical_address_expiry). The URLs
// point at the BlockStore, an http.Handler served apart from the API
// (artifactstest.ServeBlockStore serves it on a loopback test server of
// its own, standing in for S3), so the API server is not in the data
// path. They carry an expiry and an HMAC-SHA256 signature under a key
// made at random for the block store; one that expired or whose
// signature does not match is refused with 403 and S3's XML error
// (AccessDenied, SignatureDoesNotMatch), and BlockFaults make every URL
// signed so (ExpiredURLs, WrongSignatures), for tests of clients.
//
// An upload lands in BlockStoreOptions.Dir as <id>.part and becomes a
// block when its last byte has arrived; a link checks the block's size
// and MD5 (its ETag) against the body and moves its bytes into the store
// through Store.PutObject, as an upload through the API would (lakeFS's
// link only records the address: the stand-in copies once more). An
// upload cut off, or never linked, stages nothing. Without a BlockStore,
// the config says pre_sign_support: false and the staging endpoints
// answer 501, as on a lakeFS whose block store cannot presign.
//
// # Security
//
// The server listens on 127.0.0.1:8001 by default. Bound to any other
// address it requires credentials (Options.AccessKeyID and
// SecretAccessKey; the CLI reads RLPIPE_STORE_ACCESS_KEY_ID and
// RLPIPE_STORE_SECRET_ACCESS_KEY) and Listen refuses to start without
// them (internal/loopback decides). Requests then authenticate with HTTP
// Basic auth, compared in constant time; a wrong or missing pair is 401.
// The credentials are never logged or echoed, and Options prints them
// redacted. Without credentials the server answers only requests whose
// Host is a loopback address, so a web page cannot reach it through DNS
// rebinding. Traffic is plain HTTP: on an untrusted network put it behind
// TLS.
package storeserver
