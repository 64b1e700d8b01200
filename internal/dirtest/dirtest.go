// Package dirtest lists what a directory holds, for the tests that check
// which files a write left: the shards of a model directory, the copies
// an adapter cache keeps.
//
//	if got := dirtest.Names(t, dir); !slices.Equal(got, want) {
//		t.Fatalf("%s holds %q, want %q", dir, got, want)
//	}
//
// It imports nothing of the module.
package dirtest

import (
	"os"
	"testing"
)

// Names returns the names of dir's entries, sorted by name (nil when it
// is empty); a directory that cannot be read fails the test.
func Names(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}
