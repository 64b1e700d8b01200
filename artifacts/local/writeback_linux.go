//go:build linux

package local

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing n bytes of f from off
// to the disk, without waiting for them (sync_file_range(2) with
// SYNC_FILE_RANGE_WRITE), so that the fsync that makes a large blob
// durable finds most of its pages written already. It is a hint: an
// error is ignored, and the fsync still decides.
func startWriteback(f any, off, n int64) {
	sc, ok := f.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
	})
}
