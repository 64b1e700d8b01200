package rescore_test

import (
	"context"
	"os"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
)

func putFile(t *testing.T, st artifacts.Store, branch, path, local string) {
	t.Helper()
	f, err := os.Open(local)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := st.PutObject(context.Background(), branch, path, f, nil); err != nil {
		t.Fatal(err)
	}
}
