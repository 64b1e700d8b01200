package agent_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/environments/agent"
)

// UnsafePaths lists what a verifier must not open; strict also lists a
// link that resolves to nothing in the workspace, which a verifier seeing
// the workspace beside directories of its own would follow out of it.
func TestUnsafePathsStrict(t *testing.T) {
	_, w := newWorld(t)
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct{ target, name string }{
		{"a.txt", "inside"},              // resolves in the workspace
		{"../tests/expected", "dir/out"}, // beneath, dangling here; /tests/expected where dir is /dir
		{"/etc/passwd", "abs"},
	} {
		if err := os.Symlink(l.target, filepath.Join(root, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("alpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		strict bool
		want   []string
	}{
		{false, []string{"abs is a symlink to /etc/passwd, out of the workspace"}},
		{true, []string{"abs is a symlink to /etc/passwd, out of the workspace", "dir/out is a symlink to ../tests/expected, out of the workspace"}},
	} {
		got, err := agent.UnsafePaths(root, w.Dir, c.strict)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("strict %v: %q, %v; want %q", c.strict, got, err, c.want)
		}
	}
}
