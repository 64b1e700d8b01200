// Package artifactstest is the conformance suite every artifacts.Store
// backend runs: one test body, many backends, so that a pipeline behaves
// the same on the embedded store and on a lakeFS server.
//
// A backend calls Run from its own tests with a function that returns a
// fresh, empty repository — default branch "main" holding one initial
// commit and no objects, as lakeFS creates it — and registers its cleanup:
//
//	func TestConformance(t *testing.T) {
//		artifactstest.Run(t, func(t *testing.T) artifacts.Store {
//			st, err := local.Create(t.Context(), t.TempDir(), nil)
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { st.Close() })
//			return st
//		})
//	}
//
// Run groups behaviours (Objects, Listing, Staging, Branches, Tags, Refs,
// Log, Diff, Merge, Revert, GC, Provenance, Concurrency) and checks each
// in a subtest of its own with a new repository; subtests run in parallel,
// so the function must be safe to call concurrently. Select behaviours with
// -run, e.g. -run 'TestConformance/Merge/'; RunSome runs a chosen part of
// the suite, for a variant of a backend that changes one path (the
// lakefs:// backend through presigned transfers runs Objects and Staging).
//
// The suite asserts lakeFS semantics only, the behaviour every backend
// must share: names valid on lakeFS, no exact commit ids, dates or
// checksum formats (identical bytes must have identical checksums,
// different bytes different ones). Where a lakeFS server answers with a
// less specific status than the contract names, the suite accepts the
// wider error and says so at the assertion.
//
// Abilities beyond the core contract are found by type assertion and their
// behaviours are skipped when absent: merges and ^2 refs (artifacts.Merger),
// reverts (artifacts.Reverter), partial reads (artifacts.RangeReader) and
// garbage collection (artifacts.Collector; also skipped when it answers
// artifacts.ErrNotSupported, as on a lakeFS server).
//
// The package also holds the store fixtures other packages' tests share,
// so that none writes its own: NewLocal and NewLocalNamed (a fresh
// embedded store that closes with the test, the second named by its
// directory) and Open (an existing one, by URI), Put and
// PutTable (stage bytes or a Parquet table), Read, ReadInfo and ReadTable
// (an object, with the info GetObject gave, or a table back), Stat (an
// object's info), Sums (a ref's objects by checksum, to compare two
// runs), ServeLakeFS (a store served as a lakeFS and opened with the
// lakefs:// backend, or either half: Serve and OpenLakeFS or
// OpenLakeFSWith; ServeBlockStore adds a block store for presigned
// transfers), and SHA256Hex and MD5Hex (the checksums the two
// backends report). Each takes t and fails the test at once, naming what
// it was doing.
package artifactstest
