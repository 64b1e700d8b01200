package tables

import (
	"os"
	"path/filepath"
)

// ReadFile reads every row of the table t from the local file at path,
// named by its base name in errors: what a task does with its inputs.
func ReadFile[T any](path string, t *Table[T]) ([]T, error) {
	f, size, name, err := openLocal(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f, size, name, t)
}

// openLocal opens the local file at path to read it as a table: the file,
// its size, and the name errors give it (its base name).
func openLocal(path string) (*os.File, int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, "", err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, "", err
	}
	return f, fi.Size(), filepath.Base(path), nil
}

// WriteFile writes rows as the table t to a new local file at path: what a
// task does with its outputs. A file that could not be written whole is
// an error (the caller's task fails; the engine uploads nothing).
func WriteFile[T any](path string, t *Table[T], rows []T, opts *WriteOptions) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := Write(f, t, rows, opts); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
