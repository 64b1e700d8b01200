package sandbox_test

import (
	"runtime"
	"testing"

	"github.com/rlpipe/rlpipe/sandbox/sandboxtest"
)

// TestMain fails the package at once, saying how to install bubblewrap, when
// no sandbox can start here; RLPIPE_SKIP_SANDBOX=1 skips the package instead.
func TestMain(m *testing.M) { sandboxtest.Main(m, "sandbox") }

// needAMD64 skips a test whose system call numbers are x86_64's.
func needAMD64(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("system call numbers are x86_64's; the seccomp filter exists for amd64 only")
	}
}
