package safetensors

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteOptions tune how files are written. Nil means the defaults.
type WriteOptions struct {
	// NoSync skips the fsyncs of the files and of their directories. A
	// file still appears whole (written beside its place, then renamed),
	// but a crash of the machine may lose it: for files that something
	// else copies durably, as a pipeline task's outputs, which the store
	// syncs when it receives them, so that they are not synced twice.
	NoSync bool
}

func (o *WriteOptions) sync() bool { return o == nil || !o.NoSync }

// writeFileAtomic writes b to a temporary file next to path, syncs it
// (unless o says not to) and renames it over path, so readers see the old
// content or the new, never a part.
func writeFileAtomic(path string, b []byte, o *WriteOptions) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if o.sync() {
		if err = tmp.Sync(); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if o.sync() {
		syncDir(dir)
	}
	return nil
}

// syncDir makes a rename in dir durable; failures are ignored because some
// filesystems cannot sync a directory.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
