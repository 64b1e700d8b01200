package python_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/rewards/python"
)

// fakeVenv writes a venv of systemPython by hand (pyvenv.cfg and a link
// to the interpreter: what python -m venv makes, minus pip) in a
// directory every user may read, and returns it.
func fakeVenv(t *testing.T) string {
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
		[]byte("home = /usr/bin\ninclude-system-site-packages = false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(systemPython, filepath.Join(dir, "bin", "python3")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pythonMinor is systemPython's "3.11".
func pythonMinor(t *testing.T) string {
	t.Helper()
	b, err := exec.Command(systemPython, "-c", "import sys; print('%d.%d' % sys.version_info[:2])").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestFind(t *testing.T) {
	needPython(t)
	in, err := python.Find(context.Background(), systemPython)
	if err != nil {
		t.Fatal(err)
	}
	if in.Command != systemPython || len(in.Binds) != 0 || len(in.Mounts) != 0 {
		t.Fatalf("%s: %+v, want it run as is, with nothing to bind beyond /usr", systemPython, in)
	}
	venv := fakeVenv(t)
	in, err = python.Find(context.Background(), venv)
	if err != nil {
		t.Fatal(err)
	}
	want := python.Interpreter{Host: filepath.Join(venv, "bin", "python3"), Command: "/python/venv/bin/python3",
		Version: in.Version, Mounts: map[string]string{"/python/venv": venv}}
	if !reflect.DeepEqual(in, want) {
		t.Fatalf("the venv: got %+v\nwant %+v", in, want)
	}
	if err := os.Remove(filepath.Join(venv, "bin", "python3")); err != nil {
		t.Fatal(err)
	}
	_, err = python.Find(context.Background(), venv)
	if wantErr := "python " + venv + ": a directory without bin/python3, so not a venv: python interpreter not usable"; !errors.Is(err, python.ErrInterpreter) || err.Error() != wantErr {
		t.Fatalf("a directory that is no venv: %v\nwant %s", err, wantErr)
	}
}
