package steptest

import (
	"bytes"
	"context"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline/standin"
)

// Store is a fresh embedded store whose main branch holds a stand-in
// prompts table of 12 prompts at Dataset.
func Store(t testing.TB) artifacts.Store {
	t.Helper()
	ctx := context.Background()
	st, err := local.Create(ctx, t.TempDir(), "main", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := standin.PutDataset(ctx, st, "main", Dataset, 12); err != nil {
		t.Fatal(err)
	}
	return st
}

// ReadTable reads the committed table at path on ref; a missing or
// unreadable table fails the test.
func ReadTable[T any](t testing.TB, st artifacts.Store, ref, path string, tab *tables.Table[T]) []T {
	t.Helper()
	b, err := artifacts.ReadObject(context.Background(), st, ref, path)
	if err != nil || b == nil {
		t.Fatalf("read %s on %s: %v (found: %v)", path, ref, err, b != nil)
	}
	rows, err := tables.Read(bytes.NewReader(b), int64(len(b)), path, tab)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
