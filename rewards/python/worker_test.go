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
	"time"

	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/rewards/python"
	"github.com/rlpipe/rlpipe/rewards/python/pythontest"
	"github.com/rlpipe/rlpipe/sandbox"
)

// systemPython is the interpreter the tests run functions with: under
// /usr, so every sandbox sees it, whoever runs the tests.
const systemPython = "/usr/bin/python3"

func needPython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(systemPython); err != nil {
		t.Skip(systemPython + " is not installed")
	}
}

// start starts a worker with testdata/fns.py's functions named in names
// (each by its own name), with wall as the per-batch limit.
func start(t *testing.T, wall time.Duration, names ...string) *python.Worker {
	t.Helper()
	needPython(t)
	var fns []python.Function
	for _, n := range names {
		fns = append(fns, python.Function{Name: n, Ref: "testdata/fns.py:" + n})
	}
	w, err := python.Start(context.Background(), python.Options{Python: systemPython, Dir: ".", Functions: fns,
		Limits: sandbox.Limits{Wall: wall, MemoryBytes: 512 << 20}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(w.Close)
	return w
}

func texts(s ...string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func ok(v float64) python.Result { return python.Result{Score: v, Status: python.StatusOK} }

func failed(status, reason string) python.Result {
	return python.Result{Status: status, Reason: reason}
}

// ownFileErrno is the errno of a write to a function's own file: EROFS,
// or EACCES first when the sandbox runs as nobody, who may not write it.
func ownFileErrno() float64 {
	if uid, _ := sandbox.SandboxUID(); uid != os.Geteuid() {
		return -13
	}
	return -30
}

func TestScore(t *testing.T) {
	t.Setenv("RLPIPE_TEST_SECRET_TOKEN", "hunter2")
	cases := []struct {
		name  string
		batch python.Batch
		want  []python.Result
	}{
		{"length", python.Batch{Completions: texts("a", "bcd")}, []python.Result{ok(1), ok(3)}},
		{"exact", python.Batch{Completions: texts(" 4", "5"), Prompts: texts("2+2", "2+2"),
			Columns: map[string][]any{"answer": texts("4", "4")}}, []python.Result{ok(1), ok(0)}},
		{"metadata_level", python.Batch{Completions: texts("x", "y"),
			Columns: map[string][]any{"metadata": {map[string]any{"level": 2}, map[string]any{"level": 5}}}},
			[]python.Result{ok(2), ok(5)}},
		{"last_message", python.Batch{Completions: []any{
			[]any{map[string]any{"role": "assistant", "content": "hello"}},
			[]any{map[string]any{"role": "assistant", "content": "hi"}, map[string]any{"role": "tool", "content": "abc"}},
		}}, []python.Result{ok(5), ok(3)}},
		{"wrong_length", python.Batch{Completions: texts("a", "b", "c")}, []python.Result{
			failed("error", "function wrong_length returned 1 scores for 3 rows"),
			failed("error", "function wrong_length returned 1 scores for 3 rows"),
			failed("error", "function wrong_length returned 1 scores for 3 rows")}},
		{"non_number", python.Batch{Completions: texts("a")}, []python.Result{
			failed("error", "function non_number returned a str ('abc'), want a number or None")}},
		{"not_a_list", python.Batch{Completions: texts("a")}, []python.Result{
			failed("error", "function not_a_list returned a float, want a list of 1 numbers")}},
		{"nan_on_nan", python.Batch{Completions: texts("nan", "x", "inf")}, []python.Result{
			failed("nonfinite", "function nan_on_nan returned nan"), ok(1),
			failed("nonfinite", "function nan_on_nan returned inf")}},
		{"none_on_empty", python.Batch{Completions: texts("", "x")}, []python.Result{
			failed("error", "function none_on_empty returned None: not scored"), ok(1)}},
		{"raises_on_boom", python.Batch{Completions: texts("a", "boom", "c")}, []python.Result{
			ok(1), failed("error", "function raises_on_boom raised ValueError: boom row"), ok(1)}},
		{"prints", python.Batch{Completions: texts("a")}, []python.Result{ok(2)}},
		// EROFS (30) under /usr and /etc; the function's own file is
		// read-only too, refused first by its mode (EACCES, 13) when the
		// sandbox runs as nobody.
		{"write_outside", python.Batch{Completions: texts("a", "b", "c")}, []python.Result{ok(-30), ok(-30), ok(ownFileErrno())}},
		{"network", python.Batch{Completions: texts("a")}, []python.Result{ok(-101)}}, // ENETUNREACH
		{"secret", python.Batch{Completions: texts("a")}, []python.Result{ok(0)}},
	}
	var names []string
	for _, c := range cases {
		names = append(names, c.name)
	}
	w := start(t, 20*time.Second, names...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := w.Score(context.Background(), c.name, c.batch)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
	if w.Starts() != 1 {
		t.Fatalf("the worker started %d times, want once for every batch", w.Starts())
	}
}

func TestHangRestartsTheWorker(t *testing.T) {
	w := start(t, 2*time.Second, "hangs_on_hang")
	got, err := w.Score(context.Background(), "hangs_on_hang", python.Batch{Completions: texts("a", "hang")})
	if err != nil {
		t.Fatal(err)
	}
	const reason = "function hangs_on_hang: the worker ended: timeout (no answer within the wall limit 2s); restarted"
	want := []python.Result{failed("error", reason), failed("error", reason)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the hung batch: got %+v\nwant %+v", got, want)
	}
	got, err = w.Score(context.Background(), "hangs_on_hang", python.Batch{Completions: texts("b")})
	if err != nil || !reflect.DeepEqual(got, []python.Result{ok(1)}) {
		t.Fatalf("the next batch: %+v, %v", got, err)
	}
	if w.Starts() != 2 {
		t.Fatalf("the worker started %d times, want 2", w.Starts())
	}
}

func TestLoadErrors(t *testing.T) {
	needPython(t)
	for _, c := range []struct {
		name, python, ref, want string
		is                      error
	}{
		{"module missing", systemPython, "nope_no_such_module:fn",
			"function f (nope_no_such_module:fn): ModuleNotFoundError: No module named 'nope_no_such_module'", python.ErrLoad},
		{"function missing", systemPython, "testdata/fns.py:absent",
			"function f (testdata/fns.py:absent): AttributeError: module 'fns' has no attribute 'absent'", python.ErrLoad},
		{"not a function", systemPython, "testdata/fns.py:not_callable",
			"function f (testdata/fns.py:not_callable): TypeError: fns:not_callable is a int, not a function", python.ErrLoad},
		{"import raises", systemPython, "testdata/broken.py:fn",
			"function f (testdata/broken.py:fn): RuntimeError: broken at import", python.ErrLoad},
		{"file missing", systemPython, "testdata/absent.py:fn",
			"function f (testdata/absent.py:fn): no file testdata/absent.py", python.ErrLoad},
		{"no function in the reference", systemPython, "testdata/fns.py",
			`function f: "testdata/fns.py": want path/to/file.py:function or package.module:function: bad python function reference`, python.ErrBadRef},
		{"a path not ending in .py", systemPython, "testdata/fns:length",
			`function f: "testdata/fns:length": a file must end in .py: bad python function reference`, python.ErrBadRef},
		{"venv missing", "/nonexistent/venv", "testdata/fns.py:length",
			"python /nonexistent/venv: no such venv or interpreter; set python: to a venv directory or an interpreter's path: python interpreter not usable", python.ErrInterpreter},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := python.Start(context.Background(), python.Options{Python: c.python, Dir: ".",
				Functions: []python.Function{{Name: "f", Ref: c.ref}}})
			if err == nil {
				w.Close()
				t.Fatal("Start succeeded")
			}
			if !errors.Is(err, c.is) || err.Error() != c.want {
				t.Fatalf("got  %v\nwant %s", err, c.want)
			}
		})
	}
}

// A venv anywhere on the host — here under /tmp, which the sandbox's own
// /tmp hides — is mounted at /python/venv, and its site-packages import.
func TestVenvModule(t *testing.T) {
	needPython(t)
	venv := pythontest.FakeVenv(t, systemPython)
	site := pythontest.SitePackages(t, venv, systemPython)
	if err := os.WriteFile(filepath.Join(site, "venvrewards.py"),
		[]byte("def double(completions, **kw):\n    return [2.0 * len(c) for c in completions]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := python.Start(context.Background(), python.Options{Python: venv,
		Functions: []python.Function{{Name: "double", Ref: "venvrewards:double"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	got, err := w.Score(context.Background(), "double", python.Batch{Completions: texts("ab")})
	if err != nil || !reflect.DeepEqual(got, []python.Result{ok(4)}) {
		t.Fatalf("got %+v, %v", got, err)
	}
}

// The project's venv (scripts/py-venv.sh) is made from the system's
// interpreter, which the sandbox's user can read, so its packages
// (math-verify here) import and score inside the sandbox.
func TestProjectVenv(t *testing.T) {
	py := pyvenv.Python(t, "score with math-verify from the project venv")
	venv := filepath.Dir(filepath.Dir(py))
	w, err := python.Start(context.Background(), python.Options{Python: venv, Dir: "testdata",
		Functions: []python.Function{{Name: "math_equal", Ref: "venv_fns.py:math_equal"}, {Name: "base_prefix", Ref: "venv_fns.py:base_prefix"}}})
	if err != nil {
		t.Fatalf("Start with %s: %v", venv, err)
	}
	t.Cleanup(w.Close)
	got, err := w.Score(context.Background(), "math_equal", python.Batch{
		Completions: texts("so it is $\\frac{1}{2}$", "0.25", "$0.5$"),
		Columns:     map[string][]any{"answer": texts("$0.5$", "$\\frac{1}{2}$", "$\\frac{1}{2}$")},
	})
	if want := []python.Result{ok(1), ok(0), ok(1)}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("math_equal = %+v, %v; want %+v", got, err, want)
	}
	in, err := python.Find(context.Background(), venv)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(venv, "pyvenv.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	home := ""
	for _, line := range strings.Split(string(cfg), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == "home" {
			home = filepath.Dir(strings.TrimSpace(v))
		}
	}
	got, err = w.Score(context.Background(), "base_prefix", python.Batch{Completions: texts("x")})
	if want := []python.Result{ok(float64(len(home)))}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("base_prefix = %+v, %v; want the length of %s (binds %v)", got, err, home, in.Binds)
	}
}

// A venv made from an interpreter under a home directory only its owner
// may enter — pyenv's under /root, when rlpipe runs as root and the
// sandbox as nobody — is refused by Find with the directory that stops
// it, rather than failing at the sandbox's first batch.
func TestVenvUnderRootIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the sandbox runs as the caller, who can read what the caller's venv needs")
	}
	if fi, err := os.Stat("/root"); err != nil || fi.Mode().Perm()&0o001 != 0 {
		t.Skip("/root is searchable by other users here")
	}
	bases, _ := filepath.Glob("/root/.pyenv/versions/3.*/bin/python3")
	if len(bases) == 0 {
		t.Skip("no pyenv interpreter under /root")
	}
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(bases[0], "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Fatalf("make a venv of %s: %v\n%s", bases[0], err, out)
	}
	_, err := python.Find(context.Background(), venv)
	if !errors.Is(err, python.ErrUnreachable) || !strings.Contains(err.Error(), "which the sandbox's user (uid 65534) cannot read: /root is mode 0700") {
		t.Fatalf("got %v, want ErrUnreachable naming /root", err)
	}
}
