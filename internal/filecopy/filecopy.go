// Package filecopy copies a file's bytes to a new file: a policy's
// adapter into its content-addressed cache, an object out of the engine's
// cache of a remote store's objects.
package filecopy

import (
	"io"
	"os"
)

// File copies the file at src to dst, created (or emptied) with mode
// 0644 in an existing directory. The bytes stream through io.Copy, so
// between two files of one file system the kernel copies them
// (copy_file_range) without passing them through this process.
func File(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
