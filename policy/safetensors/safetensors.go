package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
)

// ErrFormat is wrapped by every error about a malformed file or header.
var ErrFormat = errors.New("malformed safetensors")

// MaxHeaderSize bounds the JSON header a reader accepts (100 MB, as the
// reference implementation does).
const MaxHeaderSize = 100 << 20

// DType names an element type as the safetensors header spells it.
type DType string

// The element types of the format.
const (
	BOOL DType = "BOOL"
	U8   DType = "U8"
	I8   DType = "I8"
	I16  DType = "I16"
	U16  DType = "U16"
	F16  DType = "F16"
	BF16 DType = "BF16"
	I32  DType = "I32"
	U32  DType = "U32"
	F32  DType = "F32"
	F64  DType = "F64"
	I64  DType = "I64"
	U64  DType = "U64"
)

// Size returns the size of one element in bytes, or 0 for an unknown dtype.
func (d DType) Size() int {
	switch d {
	case BOOL, U8, I8:
		return 1
	case I16, U16, F16, BF16:
		return 2
	case I32, U32, F32:
		return 4
	case F64, I64, U64:
		return 8
	}
	return 0
}

// Tensor is one named array: its element type, shape and raw little-endian
// row-major bytes.
type Tensor struct {
	DType DType
	Shape []int
	Data  []byte
}

// FromFloat32 returns an F32 tensor holding a copy of v. It panics if the
// shape does not hold len(v) elements, a programming error.
func FromFloat32(shape []int, v []float32) Tensor {
	if n := numElements(shape); n != len(v) {
		panic(fmt.Sprintf("safetensors: shape %v holds %d elements, not %d", shape, n, len(v)))
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return Tensor{DType: F32, Shape: slices.Clone(shape), Data: b}
}

// Len returns the number of elements of the tensor's shape.
func (t Tensor) Len() int { return numElements(t.Shape) }

// Float32 returns the elements of an F32 tensor as a new slice.
func (t Tensor) Float32() ([]float32, error) {
	if t.DType != F32 {
		return nil, fmt.Errorf("dtype is %s, want F32", t.DType)
	}
	if len(t.Data) != 4*t.Len() {
		return nil, fmt.Errorf("shape %v needs %d bytes, data has %d", t.Shape, 4*t.Len(), len(t.Data))
	}
	v := make([]float32, t.Len())
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	return v, nil
}

func numElements(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// File is the content of a safetensors file.
type File struct {
	// Metadata is the header's "__metadata__" string map; nil when absent.
	Metadata map[string]string
	Tensors  map[string]Tensor
}

// NewFile returns an empty file with the given metadata (which may be nil).
func NewFile(metadata map[string]string) *File {
	return &File{Metadata: metadata, Tensors: map[string]Tensor{}}
}

// Names returns the tensor names in sorted order.
func (f *File) Names() []string { return slices.Sorted(maps.Keys(f.Tensors)) }

// Float32 returns the F32 tensor name as a new slice, with an error naming
// the tensor when it is missing or not F32.
func (f *File) Float32(name string) ([]float32, error) {
	t, ok := f.Tensors[name]
	if !ok {
		return nil, fmt.Errorf("tensor %q: not in the file", name)
	}
	v, err := t.Float32()
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", name, err)
	}
	return v, nil
}

type headerEntry struct {
	DType       DType    `json:"dtype"`
	Shape       []int    `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// Marshal encodes f deterministically: "__metadata__" first, then the
// tensors sorted by name, with their data in the same order.
func Marshal(f *File) ([]byte, error) {
	names := f.Names()
	var h bytes.Buffer
	h.WriteByte('{')
	first := true
	if len(f.Metadata) > 0 {
		keys := slices.Sorted(maps.Keys(f.Metadata))
		h.WriteString(`"__metadata__":{`)
		for i, k := range keys {
			if i > 0 {
				h.WriteByte(',')
			}
			if err := writeJSONString(&h, k); err != nil {
				return nil, fmt.Errorf("metadata key %q: encode it: %w", k, err)
			}
			h.WriteByte(':')
			if err := writeJSONString(&h, f.Metadata[k]); err != nil {
				return nil, fmt.Errorf("metadata %q: encode the value: %w", k, err)
			}
		}
		h.WriteByte('}')
		first = false
	}
	var off int64
	for _, name := range names {
		if name == "__metadata__" {
			return nil, fmt.Errorf("tensor %q: the name is reserved for metadata", name)
		}
		t := f.Tensors[name]
		size := t.DType.Size()
		if size == 0 {
			return nil, fmt.Errorf("tensor %q: unknown dtype %q", name, t.DType)
		}
		for _, d := range t.Shape {
			if d < 0 {
				return nil, fmt.Errorf("tensor %q: negative dimension in shape %v", name, t.Shape)
			}
		}
		if want := size * t.Len(); want != len(t.Data) {
			return nil, fmt.Errorf("tensor %q: shape %v of %s needs %d bytes, data has %d", name, t.Shape, t.DType, want, len(t.Data))
		}
		if !first {
			h.WriteByte(',')
		}
		first = false
		if err := writeJSONString(&h, name); err != nil {
			return nil, fmt.Errorf("tensor %q: encode the name: %w", name, err)
		}
		h.WriteString(`:{"dtype":`)
		if err := writeJSONString(&h, string(t.DType)); err != nil {
			return nil, fmt.Errorf("tensor %q: encode the dtype: %w", name, err)
		}
		h.WriteString(`,"shape":[`)
		for i, d := range t.Shape {
			if i > 0 {
				h.WriteByte(',')
			}
			h.WriteString(strconv.Itoa(d))
		}
		h.WriteString(`],"data_offsets":[`)
		h.WriteString(strconv.FormatInt(off, 10))
		h.WriteByte(',')
		off += int64(len(t.Data))
		h.WriteString(strconv.FormatInt(off, 10))
		h.WriteString("]}")
	}
	h.WriteByte('}')
	for h.Len()%8 != 0 {
		h.WriteByte(' ')
	}
	out := make([]byte, 8, 8+h.Len()+int(off))
	binary.LittleEndian.PutUint64(out, uint64(h.Len()))
	out = append(out, h.Bytes()...)
	for _, name := range names {
		out = append(out, f.Tensors[name].Data...)
	}
	return out, nil
}

func writeJSONString(b *bytes.Buffer, s string) error {
	enc, err := json.Marshal(s)
	if err != nil {
		return err
	}
	b.Write(enc)
	return nil
}

// Unmarshal decodes a safetensors file. The tensors' Data alias b. Errors
// wrap ErrFormat and name the offending tensor.
func Unmarshal(b []byte) (*File, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("%w: %d bytes, too short for the 8-byte header length", ErrFormat, len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > MaxHeaderSize {
		return nil, fmt.Errorf("%w: header length %d exceeds the %d-byte limit", ErrFormat, n, MaxHeaderSize)
	}
	if n > uint64(len(b)-8) {
		return nil, fmt.Errorf("%w: truncated header: length %d but only %d bytes follow", ErrFormat, n, len(b)-8)
	}
	header := b[8 : 8+n]
	data := b[8+n:]
	if len(header) == 0 || header[0] != '{' {
		return nil, fmt.Errorf("%w: the header does not start with '{'", ErrFormat)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(header, &raw); err != nil {
		return nil, fmt.Errorf("%w: header JSON: %v", ErrFormat, err)
	}
	f := &File{Tensors: make(map[string]Tensor, len(raw))}
	type span struct {
		name       string
		begin, end int64
	}
	spans := make([]span, 0, len(raw))
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &f.Metadata); err != nil {
				return nil, fmt.Errorf("%w: __metadata__ must be a map of strings: %v", ErrFormat, err)
			}
			continue
		}
		var e headerEntry
		dec := json.NewDecoder(bytes.NewReader(msg))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("%w: tensor %q: %v", ErrFormat, name, err)
		}
		size := e.DType.Size()
		if size == 0 {
			return nil, fmt.Errorf("%w: tensor %q: unknown dtype %q", ErrFormat, name, e.DType)
		}
		// Bound the element count before multiplying, so a huge shape
		// cannot overflow into a small byte count.
		empty := slices.Contains(e.Shape, 0)
		elems := int64(1)
		for _, d := range e.Shape {
			if d < 0 {
				return nil, fmt.Errorf("%w: tensor %q: negative dimension in shape %v", ErrFormat, name, e.Shape)
			}
			if empty {
				continue
			}
			if elems > math.MaxInt64/int64(size)/int64(d) {
				return nil, fmt.Errorf("%w: tensor %q: shape %v holds more bytes than a file can", ErrFormat, name, e.Shape)
			}
			elems *= int64(d)
		}
		if empty {
			elems = 0
		}
		begin, end := e.DataOffsets[0], e.DataOffsets[1]
		if begin < 0 || end < begin || end > int64(len(data)) {
			return nil, fmt.Errorf("%w: tensor %q: data_offsets [%d, %d] out of range of the %d-byte data section", ErrFormat, name, begin, end, len(data))
		}
		if elems*int64(size) != end-begin {
			return nil, fmt.Errorf("%w: tensor %q: shape %v of %s needs %d bytes, data_offsets span %d", ErrFormat, name, e.Shape, e.DType, elems*int64(size), end-begin)
		}
		shape := e.Shape
		if shape == nil {
			shape = []int{}
		}
		f.Tensors[name] = Tensor{DType: e.DType, Shape: shape, Data: data[begin:end:end]}
		spans = append(spans, span{name, begin, end})
	}
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].begin != spans[j].begin {
			return spans[i].begin < spans[j].begin
		}
		if spans[i].end != spans[j].end {
			return spans[i].end < spans[j].end
		}
		return spans[i].name < spans[j].name
	})
	var at int64
	for _, s := range spans {
		if s.begin != at {
			return nil, fmt.Errorf("%w: tensor %q: data_offsets [%d, %d] leave a gap or overlap at byte %d", ErrFormat, s.name, s.begin, s.end, at)
		}
		at = s.end
	}
	if at != int64(len(data)) {
		return nil, fmt.Errorf("%w: the tensors cover %d bytes of a %d-byte data section", ErrFormat, at, len(data))
	}
	return f, nil
}

// ReadFile reads and decodes the safetensors file at path; errors name the
// file.
func ReadFile(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read safetensors: %w", err)
	}
	f, err := Unmarshal(b)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return f, nil
}

// WriteFile encodes f and writes it to path atomically: a temporary file in
// the same directory, synced, then renamed over path.
func WriteFile(path string, f *File) error { return WriteFileWith(path, f, nil) }

// WriteFileWith is WriteFile with options (nil: WriteFile's).
func WriteFileWith(path string, f *File, o *WriteOptions) error {
	b, err := Marshal(f)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return writeFileAtomic(path, b, o)
}
