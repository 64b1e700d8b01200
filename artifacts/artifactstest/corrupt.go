package artifactstest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/local"
)

// CorruptBlob flips one byte in the middle of the file in which the
// embedded store s keeps the bytes of digest (an object over 4 KiB, which
// is not kept inline), as a disk that went bad would, and returns the
// SHA-256 of what the file then holds.
func CorruptBlob(t testing.TB, s *local.Store, digest string) string {
	t.Helper()
	f := filepath.Join(s.Dir(), "blobs", digest[:2], digest)
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatalf("corrupt blob %s: %v", digest, err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatalf("corrupt blob %s: %v", digest, err)
	}
	return SHA256Hex(b)
}
