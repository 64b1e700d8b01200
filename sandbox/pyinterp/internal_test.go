package pyinterp

import (
	"os"
	"path/filepath"
	"testing"
)

func TestUnreachable(t *testing.T) {
	dir := t.TempDir()
	closed := filepath.Join(dir, "closed")
	open := filepath.Join(dir, "open")
	for _, d := range []string{filepath.Join(closed, "venv"), filepath.Join(open, "venv")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for d, mode := range map[string]os.FileMode{filepath.Dir(dir): 0o755, dir: 0o755, closed: 0o700, open: 0o755} {
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
	}
	const other = 65534 // neither the owner nor in the group
	for _, c := range []struct{ path, want string }{
		{filepath.Join(open, "venv"), ""},
		{filepath.Join(closed, "venv"), closed + " is mode 0700"},
		{filepath.Join(open, "absent"), filepath.Join(open, "absent") + ": stat " + filepath.Join(open, "absent") + ": no such file or directory"},
	} {
		if got := Unreachable(c.path, other, other); got != c.want {
			t.Errorf("Unreachable(%s) = %q, want %q", c.path, got, c.want)
		}
	}
}

func TestLayoutRefusesABaseUnderTheSandboxsOwnDirs(t *testing.T) {
	_, err := layout("/work/py/bin/python3", probeInfo{Prefix: "/work/py", BasePrefix: "/work/py",
		ExecPrefix: "/work/py", BaseExecPrefix: "/work/py", Executable: "/work/py/bin/python3"})
	const want = "python /work/py/bin/python3: it needs /work/py, under the sandbox's own /work, where the sandbox cannot show it; use a venv (only a venv is mounted elsewhere) made from an interpreter outside /work: python interpreter not usable"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}
