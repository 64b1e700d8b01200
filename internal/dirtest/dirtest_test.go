package dirtest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestNames(t *testing.T) {
	dir := t.TempDir()
	if got := Names(t, dir); got != nil {
		t.Fatalf("an empty directory holds %q, want nil", got)
	}
	for _, name := range []string{"b.safetensors", "a.json"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, want := Names(t, dir), []string{"a.json", "b.safetensors", "c"}; !slices.Equal(got, want) {
		t.Fatalf("Names = %q, want %q", got, want)
	}
}
