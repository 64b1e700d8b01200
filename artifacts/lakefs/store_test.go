package lakefs_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
)

// TestConformance runs the shared suite against a real lakeFS server when
// LAKECTL_SERVER_ENDPOINT_URL names one. Every scenario gets a repository
// of its own, rlpipe-test-<8 hex>, deleted afterwards; its data goes where
// Create puts it (RLPIPE_LAKEFS_NAMESPACE, else local://).
func TestConformance(t *testing.T) {
	if os.Getenv(lakefs.EnvEndpoint) == "" {
		t.Skipf("%s is not set: no lakeFS server to test against", lakefs.EnvEndpoint)
	}
	c, err := lakefs.NewClient(lakefs.ConfigFromEnv())
	if err != nil {
		t.Fatalf("lakeFS client: %v", err)
	}
	artifactstest.Run(t, func(t *testing.T) artifacts.Store {
		var b [4]byte
		_, _ = rand.Read(b[:])
		repo := "rlpipe-test-" + hex.EncodeToString(b[:])
		st, err := lakefs.Create(t.Context(), c, repo, nil)
		if err != nil {
			t.Fatalf("create repository %s: %v", repo, err)
		}
		t.Cleanup(func() {
			// t.Context() is already cancelled when cleanups run.
			if err := c.DeleteRepository(context.Background(), repo); err != nil {
				t.Errorf("delete repository %s: %v", repo, err)
			}
			if err := st.Close(); err != nil {
				t.Errorf("close store: %v", err)
			}
		})
		return st
	})
}
