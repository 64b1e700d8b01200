package gosource_test

import (
	"errors"
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/internal/gosource"
)

func TestParse(t *testing.T) {
	files := map[string]string{
		"a.go":                "package a\n",
		"a_test.go":           "package a\n",
		"notes.txt":           "not go\n",
		"b/b.go":              "package b\n",
		"b/testdata/t.go":     "package t\n",
		".hidden/h.go":        "package h\n",
		"node_modules/n.go":   "package n\n",
		"skipped/s.go":        "package s\n",
		"skipped/deeper/d.go": "package d\n",
	}
	root := t.TempDir()
	for p, body := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	skipped := filepath.Join(root, "skipped")
	errStop := errors.New("stop")
	for _, tc := range []struct {
		name string
		skip func(string) bool
		stop string // the file whose fn fails
		want []string
		err  error
	}{
		{"every source file", nil, "", []string{"a.go", "b/b.go", "skipped/deeper/d.go", "skipped/s.go"}, nil},
		{"a skipped folder", func(d string) bool { return d == skipped }, "", []string{"a.go", "b/b.go"}, nil},
		{"fn stops the walk", nil, "b/b.go", []string{"a.go", "b/b.go"}, errStop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			err := gosource.Parse(root, token.NewFileSet(), tc.skip, func(p string, f *ast.File) error {
				rel, _ := filepath.Rel(root, p)
				rel = filepath.ToSlash(rel)
				got = append(got, rel)
				if want := strings.TrimSpace(strings.TrimPrefix(files[rel], "package ")); f.Name.Name != want {
					t.Errorf("%s: package %s, want %s", rel, f.Name.Name, want)
				}
				if rel == tc.stop {
					return errStop
				}
				return nil
			})
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("parsed %q, want %q", got, tc.want)
			}
		})
	}
}

// A file that does not parse stops the walk with the parser's error,
// which names the file and line.
func TestParseError(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "bad.go"), []byte("package bad\nfunc (\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := gosource.Parse(root, token.NewFileSet(), nil, func(string, *ast.File) error { return nil })
	if err == nil || !strings.Contains(err.Error(), filepath.Join(root, "bad.go")+":2:") {
		t.Fatalf("err = %v, want a parse error at bad.go:2", err)
	}
}
