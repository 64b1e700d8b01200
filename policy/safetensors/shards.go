package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The weights files of a Hugging Face model directory: one file, or shards
// listed by an index.
const (
	ModelFile = "model.safetensors"
	IndexFile = "model.safetensors.index.json"
)

// DefaultMaxShardSize is the shard size above which WriteModel splits the
// weights, as transformers' save_pretrained splits above its
// max_shard_size; the 2 GiB default is rlpipe's choice.
const DefaultMaxShardSize int64 = 2 << 30

// Index is model.safetensors.index.json: the total size of the tensors'
// data and, for every tensor, the shard file that holds it.
type Index struct {
	Metadata  IndexMetadata     `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// IndexMetadata is an index's "metadata" object.
type IndexMetadata struct {
	TotalSize int64 `json:"total_size"`
}

// ShardName is the name of shard i (from 1) of n, as transformers spells
// it: model-00001-of-00003.safetensors.
func ShardName(i, n int) string {
	return fmt.Sprintf("model-%05d-of-%05d.safetensors", i, n)
}

// IsShardName reports whether name is a weights file of a model directory:
// model.safetensors or a model-*.safetensors shard.
func IsShardName(name string) bool {
	return name == ModelFile || strings.HasPrefix(name, "model-") && strings.HasSuffix(name, ".safetensors")
}

// ReadIndex reads and decodes the index file at path.
func ReadIndex(path string) (Index, error) {
	var ix Index
	b, err := os.ReadFile(path)
	if err != nil {
		return ix, err
	}
	if err := json.Unmarshal(b, &ix); err != nil {
		return ix, fmt.Errorf("read %s: %w: %v", path, ErrFormat, err)
	}
	return ix, nil
}

// IndexSingle writes IndexFile for a directory whose weights are one
// model.safetensors, mapping every tensor to it, unless an index is there
// already. A directory that keeps other safetensors files beside the
// weights (a checkpoint's optimizer.safetensors) needs it: vLLM loads
// every *.safetensors of a directory without an index, and only the files
// an index names when there is one.
func IndexSingle(dir string) error {
	ixPath := filepath.Join(dir, IndexFile)
	if _, err := os.Stat(ixPath); err == nil {
		return nil
	}
	path := filepath.Join(dir, ModelFile)
	names, err := ReadNames(path)
	if err != nil {
		return err
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	var n uint64
	err = binary.Read(f, binary.LittleEndian, &n)
	f.Close()
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	ix := Index{Metadata: IndexMetadata{TotalSize: st.Size() - 8 - int64(n)}, WeightMap: map[string]string{}}
	for _, name := range names {
		ix.WeightMap[name] = ModelFile
	}
	return writeIndex(dir, ix)
}

// writeIndex writes ix as dir's IndexFile, as transformers formats it.
func writeIndex(dir string, ix Index) error {
	b, err := json.MarshalIndent(ix, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", IndexFile, err)
	}
	return writeFileAtomic(filepath.Join(dir, IndexFile), append(b, '\n'), nil)
}

// ReadNames returns the names of the tensors of the safetensors file at
// path, sorted, reading only its header.
func ReadNames(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var n uint64
	if err := binary.Read(f, binary.LittleEndian, &n); err != nil {
		return nil, fmt.Errorf("read %s: %w: no 8-byte header length", path, ErrFormat)
	}
	if n > MaxHeaderSize {
		return nil, fmt.Errorf("read %s: %w: header length %d exceeds the %d-byte limit", path, ErrFormat, n, MaxHeaderSize)
	}
	header := make([]byte, n)
	if _, err := io.ReadFull(f, header); err != nil {
		return nil, fmt.Errorf("read %s: %w: truncated header", path, ErrFormat)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(header, &raw); err != nil {
		return nil, fmt.Errorf("read %s: %w: header JSON: %v", path, ErrFormat, err)
	}
	delete(raw, "__metadata__")
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

// WriteModel writes f's tensors into dir as a model directory's weights:
// model.safetensors when their data fits in maxShardSize bytes (0 means
// DefaultMaxShardSize), otherwise shards of at most maxShardSize each
// (a tensor larger than that alone in its shard), in name order, and
// IndexFile. Weights files of an earlier write that the new one does not
// use are removed, so the directory never mixes two checkpoints. Equal
// files and limits give equal bytes.
func WriteModel(dir string, f *File, maxShardSize int64) error {
	if maxShardSize <= 0 {
		maxShardSize = DefaultMaxShardSize
	}
	var shards []*File
	var size, total int64
	for _, name := range f.Names() {
		t := f.Tensors[name]
		n := int64(len(t.Data))
		if len(shards) == 0 || size > 0 && size+n > maxShardSize {
			shards = append(shards, NewFile(f.Metadata))
			size = 0
		}
		shards[len(shards)-1].Tensors[name] = t
		size += n
		total += n
	}
	if len(shards) == 0 {
		shards = append(shards, NewFile(f.Metadata))
	}
	keep := map[string]bool{}
	if len(shards) == 1 {
		keep[ModelFile] = true
		if err := WriteFile(filepath.Join(dir, ModelFile), shards[0]); err != nil {
			return err
		}
	} else {
		ix := Index{Metadata: IndexMetadata{TotalSize: total}, WeightMap: map[string]string{}}
		for i, s := range shards {
			name := ShardName(i+1, len(shards))
			keep[name] = true
			for t := range s.Tensors {
				ix.WeightMap[t] = name
			}
			if err := WriteFile(filepath.Join(dir, name), s); err != nil {
				return err
			}
		}
		keep[IndexFile] = true
		if err := writeIndex(dir, ix); err != nil {
			return err
		}
	}
	es, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range es {
		if (IsShardName(e.Name()) || e.Name() == IndexFile) && !keep[e.Name()] {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// ReadModel reads a model directory's weights, model.safetensors or the
// shards its IndexFile lists, as one File. It does not check the shards
// against the index beyond what merging needs: a tensor found in two
// shards is an error naming both.
func ReadModel(dir string) (*File, error) {
	ixPath := filepath.Join(dir, IndexFile)
	ix, err := ReadIndex(ixPath)
	if errors.Is(err, os.ErrNotExist) {
		return ReadFile(filepath.Join(dir, ModelFile))
	}
	if err != nil {
		return nil, err
	}
	var files []string
	for _, s := range ix.WeightMap {
		if !slices.Contains(files, s) {
			files = append(files, s)
		}
	}
	slices.Sort(files)
	out := &File{Tensors: map[string]Tensor{}}
	from := map[string]string{}
	for _, s := range files {
		g, err := ReadFile(filepath.Join(dir, s))
		if err != nil {
			return nil, err
		}
		if out.Metadata == nil {
			out.Metadata = g.Metadata
		}
		for name, t := range g.Tensors {
			if prev, ok := from[name]; ok {
				return nil, fmt.Errorf("read %s: %w: tensor %q is in both %s and %s", dir, ErrFormat, name, prev, s)
			}
			from[name] = s
			out.Tensors[name] = t
		}
	}
	return out, nil
}
