package artifactstest_test

import (
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/local"
)

// TestLocal runs the suite against the embedded store, so that a change to
// the suite is checked against a real backend in this package too.
func TestLocal(t *testing.T) {
	artifactstest.Run(t, func(t *testing.T) artifacts.Store {
		st, err := local.Create(t.Context(), t.TempDir(), "main", nil)
		if err != nil {
			t.Fatalf("create embedded store: %v", err)
		}
		t.Cleanup(func() {
			if err := st.Close(); err != nil {
				t.Errorf("close embedded store: %v", err)
			}
		})
		return st
	})
}
