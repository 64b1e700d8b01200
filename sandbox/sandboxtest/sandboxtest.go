// Package sandboxtest is the TestMain of the packages whose tests start
// sandboxes (sandbox, environments/agent, examples/agent-sandbox): they
// need a working bubblewrap, and say so at once instead of failing test
// by test.
package sandboxtest

import (
	"fmt"
	"os"
	"testing"

	"github.com/rlpipe/rlpipe/sandbox"
)

// SkipEnv set to 1 skips a package that Main guards.
const SkipEnv = "RLPIPE_SKIP_SANDBOX"

// Main runs the tests of the package named pkg (in its messages) when a
// sandbox can start here. It exits 1, saying how to install bubblewrap,
// when none can; with RLPIPE_SKIP_SANDBOX=1 it skips the package (exit 0).
func Main(m *testing.M, pkg string) {
	if os.Getenv(SkipEnv) == "1" {
		fmt.Printf("%s: skipped: %s=1\n", pkg, SkipEnv)
		os.Exit(0)
	}
	if err := sandbox.Available(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: the tests need a working bubblewrap sandbox: %v\n"+
			"Install it with `sudo apt-get install bubblewrap` or `make deps`, "+
			"or set %s=1 to skip these tests.\n", pkg, err, SkipEnv)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
