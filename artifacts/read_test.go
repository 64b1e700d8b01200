package artifacts_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/local"
)

func TestReadObject(t *testing.T) {
	ctx := context.Background()
	st, err := local.Create(ctx, filepath.Join(t.TempDir(), "s"), "main", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.PutObject(ctx, "main", "a.txt", strings.NewReader("hello"), nil); err != nil {
		t.Fatal(err)
	}
	if b, err := artifacts.ReadObject(ctx, st, "main", "a.txt"); err != nil || string(b) != "hello" {
		t.Errorf("ReadObject(a.txt) = %q, %v", b, err)
	}
	if b, err := artifacts.ReadObject(ctx, st, "main", "missing.txt"); err != nil || b != nil {
		t.Errorf("ReadObject(missing) = %q, %v; want nil, nil", b, err)
	}
}
