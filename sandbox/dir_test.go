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
