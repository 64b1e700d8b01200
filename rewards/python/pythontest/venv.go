// Package pythontest makes what the tests of Python reward code need:
// a venv written by hand, without pip or the package index.
package pythontest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// FakeVenv writes a venv of the interpreter python by hand (pyvenv.cfg
// and a link to the interpreter: what python -m venv makes, minus pip) in
// a directory every user may read, and returns it.
func FakeVenv(t testing.TB, python string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // nobody reads it when the tests run as root
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pyvenv.cfg"),
		[]byte("home = "+filepath.Dir(python)+"\ninclude-system-site-packages = false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(python, filepath.Join(dir, "bin", "python3")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// SitePackages makes and returns the site-packages directory of a venv
// of python (FakeVenv's), where a test writes the modules it imports.
func SitePackages(t testing.TB, venv, python string) string {
	t.Helper()
	b, err := exec.Command(python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])").Output()
	if err != nil {
		t.Fatalf("ask %s for its version: %v", python, err)
	}
	site := filepath.Join(venv, "lib", "python"+strings.TrimSpace(string(b)), "site-packages")
	if err := os.MkdirAll(site, 0o755); err != nil {
		t.Fatal(err)
	}
	return site
}
