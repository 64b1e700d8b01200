//go:build !linux

package local

// startWriteback is a no-op where sync_file_range(2) is missing: the
// fsync that makes a blob durable writes all of it.
func startWriteback(f any, off, n int64) {}
