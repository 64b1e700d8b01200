package runs_test

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/internal/gosource"
)

// runPath matches a run-branch path spelled in a string: the config, the
// state, or a path under iterations/, evals/, events/ or reports/ (not a
// URL's path segment such as /api/runs/{run}/iterations/{n}).
var runPath = regexp.MustCompile(`(^|[^/\w])(run/config\.yaml|run/state\.json|(iterations|evals|events|reports)/)`)

// docFields are the fields of a cobra command that are its help page:
// documentation, which may show a user the paths.
var docFields = map[string]bool{"Short": true, "Long": true, "Example": true}

// spelled returns "file:line: literal" for every string literal of f that
// spells a run path, outside help text.
func spelled(fset *token.FileSet, f *ast.File) []string {
	var at []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.KeyValueExpr:
			if k, ok := n.Key.(*ast.Ident); ok && docFields[k.Name] {
				return false
			}
		case *ast.CallExpr:
			// A flag's usage string (fs.StringVar(&v, name, default, usage))
			// is help text too.
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && strings.HasSuffix(sel.Sel.Name, "Var") && len(n.Args) == 4 {
				for _, a := range n.Args[:3] {
					ast.Inspect(a, func(m ast.Node) bool { at = append(at, check(fset, m)...); return true })
				}
				return false
			}
		case *ast.BasicLit:
			at = append(at, check(fset, n)...)
		}
		return true
	})
	return at
}

func check(fset *token.FileSet, n ast.Node) []string {
	lit, ok := n.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return nil
	}
	s, err := strconv.Unquote(lit.Value)
	if err != nil || !runPath.MatchString(s) {
		return nil
	}
	return []string{fset.Position(lit.Pos()).String() + ": " + lit.Value}
}

// No package but this one spells a run path in its code: the others
// build them with Branch, IterationPath, EvalPath and the constants, so
// the layout has one owner. Comments and help text (docs) may show them.
func TestNoOtherPackageSpellsARunPath(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	own, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var found []string
	err = gosource.Parse(root, fset, func(dir string) bool { return dir == own }, func(_ string, f *ast.File) error {
		for _, at := range spelled(fset, f) {
			rel, _ := filepath.Rel(root, at)
			found = append(found, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("%d run paths spelled outside artifacts/runs (build them with its path builders):\n  %s", len(found), strings.Join(found, "\n  "))
	}
}
