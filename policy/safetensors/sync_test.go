package safetensors

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/internal/dirtest"
)

// TestWriteOptionsNoSync: without fsyncs the files are the same bytes,
// with the same modes, and no temporary file stays behind — into a new
// directory and over an existing one.
func TestWriteOptionsNoSync(t *testing.T) {
	cfg := NewAdapterConfig("tiny-arith", 2, 4, []string{"q_proj", "up_proj"})
	state := NewFile(map[string]string{"format": "pt"})
	state.Tensors["params"] = FromFloat32([]int{3}, []float32{1, -2, 3})
	write := func(t *testing.T, dir string, o *WriteOptions) {
		t.Helper()
		if err := WriteAdapterDirWith(dir, cfg, testModules(), o); err != nil {
			t.Fatal(err)
		}
		if err := WriteFileWith(filepath.Join(dir, "optimizer.safetensors"), state, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name     string
		existing bool
	}{
		{name: "a new directory"},
		{name: "over an existing directory", existing: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			synced, unsynced := filepath.Join(root, "synced", "a"), filepath.Join(root, "unsynced", "a")
			if tc.existing {
				write(t, unsynced, nil)
			}
			write(t, synced, nil)
			write(t, unsynced, &WriteOptions{NoSync: true})
			for _, name := range []string{AdapterWeightsFile, AdapterConfigFile, "optimizer.safetensors"} {
				want, err := os.ReadFile(filepath.Join(synced, name))
				if err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(filepath.Join(unsynced, name))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s: %d bytes without syncing, %d synced, not the same", name, len(got), len(want))
				}
				if st, err := os.Stat(filepath.Join(unsynced, name)); err != nil || st.Mode().Perm() != 0o644 {
					t.Errorf("%s: mode %v (%v), want -rw-r--r--", name, st.Mode().Perm(), err)
				}
			}
			for _, dir := range []string{filepath.Dir(unsynced), unsynced} {
				names := dirtest.Names(t, dir)
				want := map[string]int{filepath.Dir(unsynced): 1, unsynced: 3}[dir]
				if len(names) != want {
					t.Errorf("%s holds %v, want %d entries", dir, names, want)
				}
			}
		})
	}
}
