package encodecheck

import (
	"fmt"
	"go/ast"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/internal/gosource"
)

// debt counts, by file, the dropped encode errors still allowed. It is
// empty: every place has been fixed, so any drop fails the test with its
// file:line. A new one is a bug to fix, not a line to add here.
var debt = map[string]int{}

// dropped returns "file:line" for every dropped encode error in a file.
func dropped(fset *token.FileSet, f *ast.File) []string {
	var at []string
	report := func(n ast.Node) { at = append(at, fset.Position(n.Pos()).String()) }
	ast.Inspect(f, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.AssignStmt:
			if len(s.Rhs) != 1 {
				return true
			}
			call, ok := s.Rhs[0].(*ast.CallExpr)
			if !ok {
				return true
			}
			last, ok := s.Lhs[len(s.Lhs)-1].(*ast.Ident)
			if !ok || last.Name != "_" {
				return true
			}
			if isJSONMarshal(call) || isEncode(call) {
				report(s)
			}
		case *ast.ExprStmt:
			if call, ok := s.X.(*ast.CallExpr); ok && isEncode(call) {
				report(s)
			}
		}
		return true
	})
	return at
}

// isJSONMarshal: json.Marshal(…) or json.MarshalIndent(…).
func isJSONMarshal(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "json" && (sel.Sel.Name == "Marshal" || sel.Sel.Name == "MarshalIndent")
}

// isEncode: X.Encode(v), the method every encoder of the standard
// library (json, xml, gob) and of ours is called by.
func isEncode(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Encode" && len(call.Args) == 1
}

func TestNoDroppedEncodeErrors(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string][]string{}
	fset := token.NewFileSet()
	err = gosource.Parse(root, fset, nil, func(p string, f *ast.File) error {
		if at := dropped(fset, f); len(at) > 0 {
			rel, _ := filepath.Rel(root, p)
			found[filepath.ToSlash(rel)] = at
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	files := make([]string, 0, len(found))
	for f := range found {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		if n := len(found[f]); n > debt[f] {
			t.Errorf("%d dropped encode error(s) in %s (debt allows %d): handle the error — JSON cannot encode NaN or ±Inf — at:\n  %s",
				n, f, debt[f], strings.Join(found[f], "\n  "))
		}
	}
	for f, n := range debt {
		if got := len(found[f]); got < n {
			t.Errorf("%s has %d dropped encode error(s), the debt table says %d: lower it to %d", f, got, n, got)
		}
	}
	if testing.Verbose() {
		total := 0
		for _, at := range found {
			total += len(at)
		}
		fmt.Printf("%d dropped encode errors in %d files\n", total, len(found))
	}
}
