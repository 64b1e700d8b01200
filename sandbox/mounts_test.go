package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/sandbox"
)

// A writable mount shows a host directory at another path, and what the
// program writes there stays on the host; the rest of the root stays
// read-only.
func TestMount(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // reachable by nobody when the tests run as root
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	uid, gid := sandbox.SandboxUID()
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	r := run(t, sandbox.Spec{Command: []string{"sh", "-c", "echo 42 > /logs/verifier/reward.txt; echo x > /logs/other"},
		Mounts: map[string]string{"/logs/verifier": dir}})
	if !strings.Contains(r.Stderr, "Read-only file system") {
		t.Fatalf("got %+v, want the write beside the mount refused", r)
	}
	b, err := os.ReadFile(filepath.Join(dir, "reward.txt"))
	if err != nil || string(b) != "42\n" {
		t.Fatalf("reward.txt on the host: %q, %v; want \"42\\n\"", b, err)
	}
}

func TestMountInvalid(t *testing.T) {
	ok := []string{"true"}
	for _, c := range []struct {
		name string
		spec sandbox.Spec
		want string
	}{
		{"mount over /tmp", sandbox.Spec{Command: ok, Mounts: map[string]string{"/tmp/x": "/opt"}},
			`mount of /opt: read-only file "/tmp/x": /tmp belongs to the sandbox or the host's binds`},
		{"mount of a relative host path", sandbox.Spec{Command: ok, Mounts: map[string]string{"/app": "app"}},
			`mount /app: host path "app": want a clean absolute path`},
		{"mount and read-only mount at one path", sandbox.Spec{Command: ok, Mounts: map[string]string{"/app": "/opt"},
			ReadOnlyMounts: map[string]string{"/app": "/opt"}}, "/app is both a mount and a read-only mount"},
		{"mount of a missing directory", sandbox.Spec{Command: ok, Mounts: map[string]string{"/app": "/nonexistent/app"}},
			"mount /nonexistent/app at /app: not a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := sandbox.Run(context.Background(), c.spec)
			if !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run = %v, want ErrInvalid saying %q", err, c.want)
			}
		})
	}
}
