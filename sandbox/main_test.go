package sandbox_test

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/rlpipe/rlpipe/sandbox"
)

// TestMain fails the package at once, saying how to install bubblewrap, when
// no sandbox can start here; RLPIPE_SKIP_SANDBOX=1 skips the package instead.
func TestMain(m *testing.M) {
	if os.Getenv("RLPIPE_SKIP_SANDBOX") == "1" {
		fmt.Println("sandbox: skipped: RLPIPE_SKIP_SANDBOX=1")
		os.Exit(0)
	}
	if err := sandbox.Available(); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox: the tests need a working bubblewrap sandbox: %v\n"+
			"Install it with `sudo apt-get install bubblewrap` or `make deps`, "+
			"or set RLPIPE_SKIP_SANDBOX=1 to skip these tests.\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// needAMD64 skips a test whose system call numbers are x86_64's.
func needAMD64(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("system call numbers are x86_64's; the seccomp filter exists for amd64 only")
	}
}
