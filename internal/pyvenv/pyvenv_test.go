package pyvenv_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/internal/pyvenv"
)

// outcome is what a test helper did to the test it was given: skipped
// it, failed it, or neither.
type outcome struct {
	testing.TB
	skipped, failed string
}

func (o *outcome) Helper() {}

func (o *outcome) Skipf(format string, args ...any) {
	o.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (o *outcome) Fatalf(format string, args ...any) {
	o.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (o *outcome) Fatal(args ...any) {
	o.failed = fmt.Sprint(args...)
	runtime.Goexit()
}

// call runs f with o in a goroutine of its own, as the testing package
// runs a test, so that a skip or a failure ends only that goroutine.
func (o *outcome) call(f func(testing.TB) string) (got string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		got = f(o)
	}()
	<-done
	return got
}

// Venv.Python finds the venv at $Env, skips in one line naming the
// script when it is absent, fails naming the script when it was made
// from other pins or its install never finished, and otherwise returns
// its python.
func TestVenvPython(t *testing.T) {
	v := pyvenv.Venv{Name: ".venv-test", Env: "RLPIPE_PYVENV_TEST", Script: "scripts/test-venv.sh",
		Requirements: "internal/pyvenv/testdata/requirements.txt"}
	pins, err := os.ReadFile("testdata/requirements.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name          string
		python, stamp []byte // nil: absent
		skip, fail    string // "%s" is the venv's directory
	}{
		{name: "absent", skip: "no .venv-test at %s: run make deps (scripts/test-venv.sh) to check the helper"},
		{name: "interrupted install", python: []byte{},
			fail: "the venv %s was not made from internal/pyvenv/testdata/requirements.txt (an older or interrupted install): run make deps (scripts/test-venv.sh)"},
		{name: "older pins", python: []byte{}, stamp: []byte("example==0.9\n"),
			fail: "the venv %s was not made from internal/pyvenv/testdata/requirements.txt (an older or interrupted install): run make deps (scripts/test-venv.sh)"},
		{name: "made from its pins", python: []byte{}, stamp: pins},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "venv")
			t.Setenv(v.Env, dir)
			if c.python != nil {
				if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "bin", "python"), c.python, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if c.stamp != nil {
				if err := os.WriteFile(filepath.Join(dir, ".requirements"), c.stamp, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			o := &outcome{TB: t}
			got := o.call(func(tb testing.TB) string { return v.Python(tb, "check the helper") })
			withDir := func(format string) string {
				if format == "" {
					return ""
				}
				return fmt.Sprintf(format, dir)
			}
			want := ""
			if c.skip == "" && c.fail == "" {
				want = filepath.Join(dir, "bin", "python")
			}
			if o.skipped != withDir(c.skip) {
				t.Errorf("skipped with %q, want %q", o.skipped, withDir(c.skip))
			}
			if o.failed != withDir(c.fail) {
				t.Errorf("failed with %q, want %q", o.failed, withDir(c.fail))
			}
			if got != want {
				t.Errorf("python %q, want %q", got, want)
			}
		})
	}
}

// Run returns the program's standard output for its standard input, and
// fails the test with what, the exit status and the standard error when
// the program fails.
func TestRun(t *testing.T) {
	for _, c := range []struct {
		name, script   string
		stdin          string
		stdout, failed string
	}{
		{name: "stdin to stdout", script: "tr a-z A-Z", stdin: "hi", stdout: "HI"},
		{name: "fails", script: "echo oops >&2; exit 3", failed: "the script: exit status 3\noops\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := &outcome{TB: t}
			got := o.call(func(tb testing.TB) string {
				return string(pyvenv.Run(tb, "the script", []byte(c.stdin), "sh", "-c", c.script))
			})
			if got != c.stdout || o.failed != c.failed {
				t.Errorf("got %q, failed with %q; want %q, %q", got, o.failed, c.stdout, c.failed)
			}
		})
	}
}

// Every venv a test looks for is made by `make deps`, which `make test`
// runs first: scripts/deps.sh runs its script, which exists, as do its
// pins. A venv left out of deps.sh would skip its tests in CI, silently.
func TestDepsMakesEveryVenv(t *testing.T) {
	root := pyvenv.Root(t)
	deps, err := os.ReadFile(filepath.Join(root, "scripts", "deps.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []pyvenv.Venv{pyvenv.Py, pyvenv.SDK, pyvenv.Data, pyvenv.Tracker, pyvenv.OpenEnv, pyvenv.Harbor} {
		if !strings.Contains(string(deps), "\n./"+v.Script+" ") {
			t.Errorf("scripts/deps.sh does not run %s, which makes %s", v.Script, v.Name)
		}
		for _, f := range []string{v.Script, v.Requirements} {
			if _, err := os.Stat(filepath.Join(root, f)); err != nil {
				t.Errorf("%s: %v", v.Name, err)
			}
		}
		script, err := os.ReadFile(filepath.Join(root, v.Script))
		if err != nil {
			continue
		}
		if s := string(script); !strings.Contains(s, v.Env) || !strings.Contains(s, v.Name) || !strings.Contains(s, filepath.Base(v.Requirements)) {
			t.Errorf("%s does not make %s from %s, or ignores $%s", v.Script, v.Name, v.Requirements, v.Env)
		}
	}
}
