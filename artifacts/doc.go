// Package artifacts is rlpipe's versioned artifact store: the contract every
// backend implements, the ref grammar, named errors and provenance.
//
// A Store is one repository with lakeFS semantics. Objects are written to a
// branch, where they stay staged (uncommitted, but durable) until Commit
// records them in an immutable commit with parents and a metadata map.
// Branches are cheap: creating one copies no data. Any commit can be named
// by a ref expression — a branch, a tag, a commit id or a unique prefix of
// one, followed by ~N (N-th first-parent ancestor) or ^N (N-th parent):
//
//	st, err := artifacts.Open(ctx, "./.rlpipe", nil)          // or "lakefs://my-repo"
//	_, err = st.PutObject(ctx, "main", "data/prompts.parquet", f, nil)
//	c, err := st.Commit(ctx, "main", "add prompts", nil)
//	_, err = st.CreateBranch(ctx, "try-reward", "main")
//	for ch, err := range st.Diff(ctx, "main", "try-reward", nil) { … }
//
// Branches and tags share one namespace, as on lakeFS: creating a tag
// named like a branch is refused (ErrBranchExists), and a branch named
// like a tag (ErrTagExists), so a name means one ref. A full commit id
// means that commit, and a branch or tag wins over a commit-id prefix its
// name happens to spell.
//
// Backends register a Driver for a URI scheme (the embedded store in
// artifacts/local for plain paths, lakeFS in artifacts/lakefs for
// lakefs://) and are chosen by Open; import them for their side effect.
// Abilities beyond the core — Merger, Reverter, Collector, Verifier,
// RangeReader — are separate interfaces found by type assertion.
//
// Errors form a hierarchy tested with errors.Is: ErrBranchNotFound wraps
// ErrRefNotFound, which wraps ErrNotFound; ErrMergeConflict wraps
// ErrConflict, and its *MergeConflictError lists the conflicting paths.
//
// Every artifact written by a pipeline task carries Provenance (producing
// task and version, input checksums, config hash, policy version, seed,
// time) as object metadata.
//
// The shared conformance suite in artifacts/artifactstest runs against
// every backend.
package artifacts
