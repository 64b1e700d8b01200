// Package configtest cuts a shipped example's config down for a test:
// fewer iterations, smaller evaluations, a file named by absolute path.
// The edits are exact texts the config must hold, so that a test fails,
// naming the text, when the example it cuts down has moved on, instead of
// quietly running the example as shipped.
//
//	src := configtest.Edit(t, "examples/arithmetic/pipeline.yaml", raw, map[string]string{
//		"iterations: 60": "iterations: 4",
//		"spec: reward.yaml": "spec: " + configtest.Abs(t, "../examples/arithmetic/reward.yaml"),
//	})
//
// The command's tests (cli) and the examples' (examples/exampletest) share
// it; it imports nothing of the module.
package configtest

import (
	"path/filepath"
	"strings"
	"testing"
)

// Edit returns src with each key of edits replaced, once, by its value.
// A src that lacks a key fails the test, naming what src is (the file it
// was read from) and the key.
func Edit(t testing.TB, what, src string, edits map[string]string) string {
	t.Helper()
	for old, new := range edits {
		if !strings.Contains(src, old) {
			t.Fatalf("%s no longer has %q; update this test", what, old)
		}
		src = strings.Replace(src, old, new, 1)
	}
	return src
}

// Abs is path made absolute, for a config written to another directory
// that names a file of the repository.
func Abs(t testing.TB, path string) string {
	t.Helper()
	a, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
