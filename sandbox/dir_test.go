package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/sandbox"
)

// workDir returns a directory RunIn can use: reachable and owned by the
// sandbox's user.
func workDir(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	if err := os.Chmod(base, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(base), 0o711); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "work")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	uid, gid := sandbox.SandboxUID()
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRunInKeepsWritesBetweenRuns(t *testing.T) {
	ctx := context.Background()
	dir := workDir(t)
	run := func(script string) sandbox.Result {
		t.Helper()
		r, err := sandbox.RunIn(ctx, dir, sandbox.Spec{Command: []string{"sh", "-c", script}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := run("pwd; echo 41 > n"); !r.Passed() || r.Stdout != "/work\n" {
		t.Fatalf("first run: %+v", r)
	}
	if r := run("echo $(( $(cat n) + 1 ))"); !r.Passed() || r.Stdout != "42\n" {
		t.Fatalf("second run: %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "n")); err != nil || string(b) != "41\n" {
		t.Fatalf("host sees %q, %v", b, err)
	}
	for _, script := range []string{"echo x > /etc/x", "echo x > ../x", "cd ../.. && echo x > x", "echo x > /tmp/x && test -e " + dir} {
		if r := run(script); r.Passed() {
			t.Errorf("%q passed; want a failure", script)
		}
	}
}

func TestRunInInvalid(t *testing.T) {
	ctx := context.Background()
	for name, c := range map[string]struct {
		dir  string
		spec sandbox.Spec
	}{
		"relative dir": {"work", sandbox.Spec{Command: []string{"true"}}},
		"missing dir":  {"/nonexistent/work", sandbox.Spec{Command: []string{"true"}}},
		"files":        {os.TempDir(), sandbox.Spec{Command: []string{"true"}, Files: map[string][]byte{"a": nil}}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := sandbox.RunIn(ctx, c.dir, c.spec); !errors.Is(err, sandbox.ErrInvalid) {
				t.Fatalf("RunIn(%q) = %v, want ErrInvalid", c.dir, err)
			}
		})
	}
}

// RunIn gives a checker what Run does: files it can read but not change
// outside the writable directory, and a verdict channel only the run that
// asks for one has.
func TestRunInReadOnlyFilesAndVerdict(t *testing.T) {
	ctx := context.Background()
	dir := workDir(t)
	if err := os.WriteFile(filepath.Join(dir, "answer.txt"), []byte("42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check := sandbox.Spec{
		Command: []string{"bash", "-c", `
			for f in /check/expected.txt /check/sub/b.txt; do
				echo x > "$f" 2>/dev/null && echo "wrote $f"
				rm -f "$f" 2>/dev/null; test -e "$f" || echo "removed $f"
			done
			mv /check /check2 2>/dev/null && echo "moved /check"
			echo y > /check/new.txt 2>/dev/null && echo "added to /check"
			cat /check/sub/b.txt
			if cmp -s answer.txt /check/expected.txt; then echo "pass: 42" > "$RLPIPE_VERDICT"; fi
			echo done > checked.txt`},
		ReadOnlyFiles: map[string][]byte{"/check/expected.txt": []byte("42\n"), "/check/sub/b.txt": []byte("b\n")},
		Verdict:       true,
	}
	r, err := sandbox.RunIn(ctx, dir, check)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != sandbox.StatusOK || r.Stdout != "b\n" || r.Verdict != "pass: 42\n" {
		t.Fatalf("checker: status %s, stdout %q, stderr %q, verdict %q; want ok, %q, %q", r.Status, r.Stdout, r.Stderr, r.Verdict, "b\n", "pass: 42\n")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "checked.txt")); err != nil || string(b) != "done\n" {
		t.Fatalf("the checker's write to the directory: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "check")); !os.IsNotExist(err) {
		t.Fatalf("the read-only files reached the directory: %v", err)
	}
	// Without Verdict the variable is unset and no descriptor is open for it
	// (ls's own, 3, is its listing of /proc/self/fd);
	// without ReadOnlyFiles there is no /check.
	r, err = sandbox.RunIn(ctx, dir, sandbox.Spec{Command: []string{"bash", "-c", `
		echo "verdict=${RLPIPE_VERDICT-unset}"
		echo fds $(ls /proc/self/fd)
		ls /check 2>&1 | sed 's/^ls: //'`}})
	if err != nil {
		t.Fatal(err)
	}
	want := "verdict=unset\nfds 0 1 2 3\ncannot access '/check': No such file or directory\n"
	if r.Stdout != want || r.Verdict != "" {
		t.Fatalf("a run without a verdict channel: stdout %q, verdict %q; want %q and none", r.Stdout, r.Verdict, want)
	}
	if _, err := sandbox.RunIn(ctx, dir, sandbox.Spec{Command: []string{"true"},
		ReadOnlyFiles: map[string][]byte{"/work/x": nil}}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("a read-only file in /work: %v, want ErrInvalid", err)
	}
}
