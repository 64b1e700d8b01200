package rescore_test

import (
	"context"
	"os"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

func writeFile(path string, rows []tables.Prompt) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := tables.Write(f, tables.Prompts, rows, nil); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

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
