package local

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Small objects — cache entries, memo records, event lines, a run's state
// — keep their bytes in meta.db rather than in a file of their own: a
// file costs a create, two fsyncs (the file, then its directory after the
// rename) and a rename, several times what a few hundred bytes cost in
// the bbolt transaction that stages the object anyway. Written in that
// one transaction, the bytes and the record that names them are durable
// together: a process killed at any moment leaves both or neither.
//
// The bucket is keyed by SHA-256 like the blob files, so identical small
// objects are stored once. A store written before inline objects existed
// has small objects in files: a read that finds no inline bytes for a
// digest reads its file, so such stores read as before.

// inlineMax is the size up to which an object's bytes are kept in meta.db
// (one bbolt page).
const inlineMax = 4096

// bucketInline holds the bytes of small objects: SHA-256 hex → bytes.
var bucketInline = []byte("blobs")

// digestHex is the SHA-256 hex of b.
func digestHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// putInline stores data under its digest in tx unless it is there.
func putInline(tx *bolt.Tx, digest string, data []byte) error {
	b, err := tx.CreateBucketIfNotExists(bucketInline)
	if err != nil {
		return err
	}
	if b.Get([]byte(digest)) != nil {
		return nil
	}
	return b.Put([]byte(digest), data)
}

// getInline returns the inline bytes of digest, valid only during tx (nil
// when the object's bytes are in a file).
func getInline(tx *bolt.Tx, digest string, size int64) []byte {
	if size > inlineMax {
		return nil
	}
	b := tx.Bucket(bucketInline)
	if b == nil {
		return nil
	}
	return b.Get([]byte(digest))
}

// checkInline returns a copy of inline bytes once they match the digest
// and size they are recorded with, or ErrIntegrity.
func checkInline(data []byte, digest string, size int64, what string) ([]byte, error) {
	if int64(len(data)) != size {
		return nil, corrupted(what, digest, fmt.Sprintf("read back as %d bytes, recorded as %d (inline in meta.db)", len(data), size))
	}
	if got := digestHex(data); got != digest {
		return nil, corrupted(what, digest, fmt.Sprintf("read back with digest %s (inline in meta.db)", got))
	}
	return bytes.Clone(data), nil
}
