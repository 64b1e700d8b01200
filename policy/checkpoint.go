package policy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/rlpipe/rlpipe/policy/safetensors"
)

// Kind is what a policy checkpoint directory holds.
type Kind int

// The kinds of checkpoint directory a train task writes.
const (
	// KindAdapter is a PEFT LoRA adapter: adapter_config.json and
	// adapter_model.safetensors.
	KindAdapter Kind = iota + 1
	// KindWeights is a full Hugging Face model directory: config.json and
	// model.safetensors, or shards listed by model.safetensors.index.json.
	KindWeights
)

func (k Kind) String() string {
	switch k {
	case KindAdapter:
		return "adapter"
	case KindWeights:
		return "weights"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// ErrCheckpoint is wrapped by every error about a checkpoint directory
// that is neither kind, or whose weights do not match their index.
var ErrCheckpoint = errors.New("not a policy checkpoint")

// ErrShards is wrapped by CheckShards' errors: the weights' shards do not
// match model.safetensors.index.json. It wraps ErrCheckpoint.
var ErrShards = fmt.Errorf("%w: shards do not match their index", ErrCheckpoint)

// The file that makes a directory a PEFT adapter.
const adapterConfigFile = "adapter_config.json"

// CheckpointKind tells a PEFT adapter directory (adapter_config.json
// present) from a full-weights model directory (config.json and
// model.safetensors or model.safetensors.index.json, no
// adapter_config.json). Anything else is an error naming the directory.
func CheckpointKind(dir string) (Kind, error) {
	has := func(name string) (bool, error) {
		st, err := os.Stat(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read checkpoint %s: %w", dir, err)
		}
		return st.Mode().IsRegular(), nil
	}
	st, err := os.Stat(dir)
	if err != nil {
		return 0, fmt.Errorf("read checkpoint %s: %w", dir, err)
	}
	if !st.IsDir() {
		return 0, fmt.Errorf("read checkpoint %s: not a directory: %w", dir, ErrCheckpoint)
	}
	var found [4]bool
	for i, name := range []string{adapterConfigFile, "config.json", safetensors.ModelFile, safetensors.IndexFile} {
		if found[i], err = has(name); err != nil {
			return 0, err
		}
	}
	switch {
	case found[0]:
		return KindAdapter, nil
	case found[1] && (found[2] || found[3]):
		return KindWeights, nil
	}
	return 0, fmt.Errorf("read checkpoint %s: %w: it holds neither a PEFT adapter (%s) nor full weights (config.json with %s or %s); point the policy input at a train task's output or an exported model",
		dir, ErrCheckpoint, adapterConfigFile, safetensors.ModelFile, safetensors.IndexFile)
}

// CheckShards checks a full-weights directory's shards against its
// model.safetensors.index.json: every file the index names exists, every
// tensor of the weight map is in the file it names, and no shard
// (model-*.safetensors) is left out of the index. A directory with a
// single model.safetensors and no index passes. Errors wrap ErrShards and
// name the shard at fault.
func CheckShards(dir string) error {
	ixPath := filepath.Join(dir, safetensors.IndexFile)
	ix, err := safetensors.ReadIndex(ixPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check the shards of %s: %w: %w", dir, err, ErrShards)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("check the shards of %s: %s: %w (the directory is incomplete or mixes two checkpoints; write it again)",
			dir, fmt.Sprintf(format, args...), ErrShards)
	}
	byShard := map[string][]string{}
	for tensor, shard := range ix.WeightMap {
		if filepath.Base(shard) != shard || shard == "." || shard == ".." {
			return bad("tensor %s is mapped to %q, not a file of the directory", tensor, shard)
		}
		byShard[shard] = append(byShard[shard], tensor)
	}
	shards := make([]string, 0, len(byShard))
	for s := range byShard {
		shards = append(shards, s)
	}
	slices.Sort(shards)
	for _, s := range shards {
		names, err := safetensors.ReadNames(filepath.Join(dir, s))
		if errors.Is(err, fs.ErrNotExist) {
			return bad("shard %s, named by %s, is missing", s, safetensors.IndexFile)
		}
		if err != nil {
			return bad("shard %s: %v", s, err)
		}
		tensors := byShard[s]
		slices.Sort(tensors)
		for _, t := range tensors {
			if _, ok := slices.BinarySearch(names, t); !ok {
				return bad("shard %s does not hold tensor %s, which %s maps to it", s, t, safetensors.IndexFile)
			}
		}
	}
	es, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("check the shards of %s: %w", dir, err)
	}
	for _, e := range es {
		if safetensors.IsShardName(e.Name()) && byShard[e.Name()] == nil {
			return bad("shard %s is not listed in %s", e.Name(), safetensors.IndexFile)
		}
	}
	return nil
}

// WeightsLoader is implemented by policies that load full model weights
// while they run: LoadWeights makes the Hugging Face model directory dir
// available as name, which Sampling.Adapter then selects as it selects an
// adapter; UnloadWeights forgets it.
type WeightsLoader interface {
	LoadWeights(ctx context.Context, name, dir string) error
	UnloadWeights(ctx context.Context, name string) error
}
