package safetensors_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/internal/dirtest"
	"github.com/rlpipe/rlpipe/policy/safetensors"
)

// WriteModel shards in name order above the limit, writes the index
// transformers writes, reads back as one file, and a rewrite with another
// limit leaves none of the old weights files behind.
func TestWriteModelShards(t *testing.T) {
	f := safetensors.NewFile(map[string]string{"format": "pt"})
	f.Tensors["a"] = safetensors.FromFloat32([]int{4}, []float32{1, 2, 3, 4})       // 16 bytes
	f.Tensors["b"] = safetensors.FromFloat32([]int{2}, []float32{5, 6})             // 8
	f.Tensors["c"] = safetensors.FromFloat32([]int{6}, []float32{7, 8, 9, 1, 2, 3}) // 24: alone, above the limit
	f.Tensors["d"] = safetensors.FromFloat32([]int{1}, []float32{4})                // 4
	for _, tc := range []struct {
		name     string
		maxShard int64
		files    []string
		index    string
	}{
		{"one file", 0, []string{"model.safetensors"}, ""},
		{"sharded", 24, []string{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors", "model.safetensors.index.json"},
			`{
  "metadata": {
    "total_size": 52
  },
  "weight_map": {
    "a": "model-00001-of-00003.safetensors",
    "b": "model-00001-of-00003.safetensors",
    "c": "model-00002-of-00003.safetensors",
    "d": "model-00003-of-00003.safetensors"
  }
}
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// A stale write with another layout goes.
			other := int64(8)
			if tc.maxShard != 0 {
				other = 0
			}
			if err := safetensors.WriteModel(dir, f, other); err != nil {
				t.Fatal(err)
			}
			if err := safetensors.WriteModel(dir, f, tc.maxShard); err != nil {
				t.Fatal(err)
			}
			if files := dirtest.Names(t, dir); !slices.Equal(files, tc.files) {
				t.Fatalf("files = %q, want %q", files, tc.files)
			}
			if tc.index != "" {
				b, err := os.ReadFile(filepath.Join(dir, safetensors.IndexFile))
				if err != nil || string(b) != tc.index {
					t.Fatalf("index = %s (%v), want %s", b, err, tc.index)
				}
			}
			g, err := safetensors.ReadModel(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g.Tensors, f.Tensors) || !reflect.DeepEqual(g.Metadata, f.Metadata) {
				t.Fatalf("read back %v, want %v", g, f)
			}
		})
	}
}

func TestReadNames(t *testing.T) {
	dir := t.TempDir()
	f := safetensors.NewFile(map[string]string{"format": "pt"})
	f.Tensors["z"] = safetensors.FromFloat32([]int{1}, []float32{1})
	f.Tensors["y"] = safetensors.FromFloat32([]int{1}, []float32{2})
	path := filepath.Join(dir, "w.safetensors")
	if err := safetensors.WriteFile(path, f); err != nil {
		t.Fatal(err)
	}
	names, err := safetensors.ReadNames(path)
	if err != nil || !slices.Equal(names, []string{"y", "z"}) {
		t.Fatalf("ReadNames = %q, %v", names, err)
	}
	if err := os.WriteFile(path, []byte{1, 2}, 0o644); err != nil {
		t.Fatal(err)
	}
	want := "read " + path + ": malformed safetensors: no 8-byte header length"
	if _, err := safetensors.ReadNames(path); err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

// IndexSingle indexes a lone model.safetensors, so that a loader that
// globs *.safetensors (vLLM) reads only the weights, not the files beside
// them; an index already there is kept.
func TestIndexSingle(t *testing.T) {
	dir := t.TempDir()
	f := safetensors.NewFile(map[string]string{"format": "pt"})
	f.Tensors["b"] = safetensors.FromFloat32([]int{2}, []float32{5, 6})
	f.Tensors["a"] = safetensors.FromFloat32([]int{4}, []float32{1, 2, 3, 4})
	if err := safetensors.WriteModel(dir, f, 0); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := safetensors.IndexSingle(dir); err != nil {
			t.Fatal(err)
		}
	}
	want := `{
  "metadata": {
    "total_size": 24
  },
  "weight_map": {
    "a": "model.safetensors",
    "b": "model.safetensors"
  }
}
`
	if b, err := os.ReadFile(filepath.Join(dir, safetensors.IndexFile)); err != nil || string(b) != want {
		t.Fatalf("index = %s (%v), want %s", b, err, want)
	}
	if g, err := safetensors.ReadModel(dir); err != nil || !reflect.DeepEqual(g.Tensors, f.Tensors) {
		t.Fatalf("read back through the index: %v", err)
	}
	err := safetensors.IndexSingle(t.TempDir())
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a directory without weights: err = %v, want one matching os.ErrNotExist", err)
	}
}
