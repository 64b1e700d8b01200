// Package gosource walks the module's Go source for the tests that read
// it as code: the run layout's one owner (artifacts/runs), encode errors
// that are not dropped (internal/encodecheck).
package gosource

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
)

// Parse parses every Go file below root that is not a test, in lexical
// order, and calls fn with its path and syntax tree. It skips hidden
// folders, testdata and node_modules, and every folder skip reports (nil
// skips none). It stops at the first error, of the walk, a parse or fn.
func Parse(root string, fset *token.FileSet, skip func(dir string) bool, fn func(path string, f *ast.File) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") || skip != nil && skip(p) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		return fn(p, f)
	})
}
