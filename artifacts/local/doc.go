// Package local is the embedded artifact store, rlpipe's default backend
// (a plain path such as ./.rlpipe as the store URI).
//
// A store directory holds:
//
//	meta.db           bbolt: repository record, branches, tags, commits,
//	                  ranges and metaranges (the commit trees), the
//	                  staging area of every branch, and the bytes of
//	                  objects of at most 4 KiB
//	blobs/ab/abcd…    bytes of larger objects, named by their SHA-256
//	                  (their chunk CRCs in meta.db)
//	tmp/              uploads in flight (renamed into blobs/ when complete)
//
// A small object (a cache entry, a memo record) is staged with its bytes
// in one transaction: no file, no rename, no fsync of its own, and a
// process killed at any moment leaves the bytes and the record together
// or neither. Identical bytes are stored once either way.
//
// Objects are content-addressed: identical bytes are stored once. A large
// object is written in one pass over its bytes, hashed on a second
// goroutine as it is written, and a blob stored already is not written
// to the disk again (its temporary file is dropped unsynced; a file whose
// size and first chunk match a stored blob is hashed before it is
// written, and not copied at all when it is stored). A read
// never hands out a byte that fails a check: objects up to 4 MiB are
// checked whole against their SHA-256 before the first byte is returned;
// larger ones are read once, each 1 MiB chunk handed out only once it
// matches the CRC-32C recorded for it when it was hashed (chunksums.go),
// or, for blobs written before those existed, checked whole by a first
// pass and handed out by a second. A mismatch is artifacts.ErrIntegrity
// naming the object and its blob; a disk that fills during a write is
// ErrNoSpace naming the object, with nothing half-written.
// Verify (`rlpipe fsck`) checks every commit, tree (root, chunks, ranges)
// and blob a ref reaches, and GC refuses a store whose metadata or blobs
// are damaged.
//
// A commit's tree is, as in lakeFS, a metarange listing ranges of sorted
// entries, range boundaries chosen by a hash of each path. A tree of more
// than 128 ranges has more levels: its list of ranges is cut into chunks
// (version-1 metarange records, about 16 ranges each) at boundaries chosen
// by the same hash, the list of chunks into version-2 records, and so on
// until one record, the root, remains; smaller trees keep the single
// version-1 list, and stores written before levels existed read unchanged
// (see docs/FORMAT.md). The tree is therefore a pure function of its
// entries, and two trees that differ in a few paths share all other
// records: a commit writes one range and one record a level for each place
// it changes, whatever the size of the tree; lookups read one record a
// level; commit, diff and merge read only the ranges and chunks that
// changed; and creating a branch writes one record.
//
// Every change of metadata is one bbolt transaction, so a process killed
// at any moment leaves each branch at its old commit or its new one, and
// staged changes survive. The metadata file is locked per operation, not
// per process: several processes (a running pipeline, a CLI reading it)
// share a store, their writes serialised; a branch update that finds the
// branch moved under it fails with artifacts.ErrConcurrentUpdate. (The
// file stays open half a millisecond after an operation, so that a loop
// of reads does not reopen it for each; never longer than 100 ms of
// back-to-back operations, and Close releases it at once.)
//
// Use it through artifacts.Open (import this package for its side effect)
// or directly with Open and Create.
package local
