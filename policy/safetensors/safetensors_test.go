package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sample() *File {
	f := NewFile(map[string]string{"format": "pt", "note": "tab\there \"quoted\""})
	f.Tensors["b.weight"] = FromFloat32([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6})
	f.Tensors["a.bias"] = FromFloat32([]int{3}, []float32{-1, 0.5, 1e-3})
	f.Tensors["scalar"] = FromFloat32([]int{}, []float32{7})
	f.Tensors["ids"] = Tensor{DType: I64, Shape: []int{2}, Data: make([]byte, 16)}
	return f
}

func TestRoundTrip(t *testing.T) {
	b, err := Marshal(sample())
	if err != nil {
		t.Fatal(err)
	}
	if n := binary.LittleEndian.Uint64(b); n%8 != 0 {
		t.Errorf("header length %d is not a multiple of 8", n)
	}
	g, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if g.Metadata["note"] != "tab\there \"quoted\"" {
		t.Errorf("metadata = %q", g.Metadata)
	}
	w, err := g.Float32("b.weight")
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != 6 || w[5] != 6 {
		t.Errorf("b.weight = %v", w)
	}
	if s := g.Tensors["scalar"]; len(s.Shape) != 0 || s.Len() != 1 {
		t.Errorf("scalar = %+v", s)
	}
	if _, err := g.Float32("ids"); err == nil || !strings.Contains(err.Error(), `"ids"`) {
		t.Errorf("Float32 of an I64 tensor: %v", err)
	}
	b2, err := Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, b2) {
		t.Error("re-encoding a decoded file changed its bytes")
	}
}

// TestDeterministic pins the exact bytes: tensors sorted by name, metadata
// first, spaces as padding.
func TestDeterministic(t *testing.T) {
	f := NewFile(map[string]string{"format": "pt"})
	f.Tensors["z"] = FromFloat32([]int{1}, []float32{2})
	f.Tensors["a"] = FromFloat32([]int{1}, []float32{1})
	b, err := Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	header := string(b[8 : 8+n])
	want := `{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"z":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`
	if strings.TrimRight(header, " ") != want {
		t.Errorf("header\n got %s\nwant %s", header, want)
	}
}

// TestForeignFile decodes a file laid out by hand the way the reference
// implementation writes it, without metadata.
func TestForeignFile(t *testing.T) {
	header := `{"test":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}`
	for len(header)%8 != 0 {
		header += " "
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	for _, v := range []uint32{0x3f800000, 0x40000000, 0x40400000, 0x40800000} {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	f, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	v, err := f.Float32("test")
	if err != nil {
		t.Fatal(err)
	}
	if v[0] != 1 || v[3] != 4 || f.Metadata != nil {
		t.Errorf("got %v, metadata %v", v, f.Metadata)
	}
}

func encode(header string, data int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, data)...)
}

func TestUnmarshalErrors(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "too short"},
		{"truncated header", binary.LittleEndian.AppendUint64(nil, 100), "truncated header"},
		{"huge header", binary.LittleEndian.AppendUint64(nil, 1<<40), "exceeds"},
		{"not json", encode("nonsense", 0), "does not start"},
		{"bad json", encode("{", 0), "header JSON"},
		{"unknown dtype", encode(`{"w":{"dtype":"F31","shape":[1],"data_offsets":[0,4]}}`, 4), `tensor "w": unknown dtype "F31"`},
		{"offsets out of range", encode(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4), `tensor "w": data_offsets [0, 8] out of range`},
		{"size mismatch", encode(`{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8), `tensor "w": shape [3] of F32 needs 12 bytes`},
		{"shape overflows", encode(`{"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}}`, 0), `tensor "w": shape [4611686018427387904] holds more bytes`},
		{"negative dim", encode(`{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, 4), `tensor "w": negative dimension`},
		{"gap", encode(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8), `tensor "w": data_offsets [4, 8] leave a gap`},
		{"overlap", encode(`{"v":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 4), "leave a gap or overlap"},
		{"trailing data", encode(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 8), "cover 4 bytes of a 8-byte"},
		{"bad metadata", encode(`{"__metadata__":{"a":1}}`, 0), "map of strings"},
		{"unknown field", encode(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}`, 4), `tensor "w"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Unmarshal(c.in)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrFormat) {
				t.Errorf("%v does not wrap ErrFormat", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
		})
	}
}

func TestMarshalErrors(t *testing.T) {
	f := NewFile(nil)
	f.Tensors["w"] = Tensor{DType: F32, Shape: []int{3}, Data: make([]byte, 8)}
	if _, err := Marshal(f); err == nil || !strings.Contains(err.Error(), `tensor "w"`) {
		t.Errorf("size mismatch: %v", err)
	}
	f.Tensors["w"] = Tensor{DType: "X", Shape: []int{1}, Data: make([]byte, 4)}
	if _, err := Marshal(f); err == nil || !strings.Contains(err.Error(), "unknown dtype") {
		t.Errorf("unknown dtype: %v", err)
	}
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	if err := WriteFile(path, sample()); err != nil {
		t.Fatal(err)
	}
	f, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != 4 {
		t.Errorf("%d tensors", len(f.Tensors))
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("temporary files left behind: %v", ents)
	}
	b, _ := os.ReadFile(path)
	os.WriteFile(path, b[:len(b)-1], 0o644)
	_, err = ReadFile(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a truncated file: %v, want an error naming %s", err, path)
	}
}

func FuzzUnmarshal(f *testing.F) {
	b, _ := Marshal(sample())
	f.Add(b)
	f.Add(encode(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 4))
	f.Add(encode(`{"__metadata__":{"a":"b"}}`, 0))
	f.Add(encode(`{"w":{"dtype":"BF16","shape":[2,0],"data_offsets":[0,0]}}`, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := Unmarshal(b)
		if err != nil {
			return
		}
		// Whatever parses re-encodes, and the encoding parses to the same.
		enc, err := Marshal(g)
		if err != nil {
			t.Fatalf("a decoded file does not encode: %v", err)
		}
		h, err := Unmarshal(enc)
		if err != nil {
			t.Fatalf("an encoded file does not decode: %v", err)
		}
		enc2, _ := Marshal(h)
		if !bytes.Equal(enc, enc2) {
			t.Fatal("encoding is not stable")
		}
	})
}
