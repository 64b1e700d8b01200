package filecopy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/internal/filecopy"
)

// File copies the bytes, replaces what dst held, and names the missing
// file or directory in its error.
func TestFile(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := os.WriteFile(src, []byte("adapter bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, []byte("an older, longer content"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := filecopy.File(src, dst); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "adapter bytes" {
		t.Fatalf("dst holds %q", b)
	}
	if err := filecopy.File(filepath.Join(dir, "gone"), dst); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("a missing source: %v", err)
	}
	if err := filecopy.File(src, filepath.Join(dir, "no-dir", "dst")); err == nil || !strings.Contains(err.Error(), "no-dir") {
		t.Fatalf("a missing directory: %v", err)
	}
}
