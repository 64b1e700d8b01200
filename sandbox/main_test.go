package sandbox_test

import (
	"fmt"
	"os"
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
