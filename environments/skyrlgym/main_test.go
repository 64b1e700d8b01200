package skyrlgym_test

import (
	"testing"

	"github.com/rlpipe/rlpipe/sandbox/sandboxtest"
)

// TestMain fails the package at once, saying how to install bubblewrap,
// when no sandbox can start here; RLPIPE_SKIP_SANDBOX=1 skips it.
func TestMain(m *testing.M) { sandboxtest.Main(m, "environments/skyrlgym") }
