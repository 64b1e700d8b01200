package policy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/safetensors"
)

// weightsDir writes a full-weights directory: config.json and the tensors
// w0…w3 (4 float32 each, 16 bytes), sharded above maxShard bytes.
func weightsDir(t *testing.T, maxShard int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"architectures":["LlamaForCausalLM"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	f := safetensors.NewFile(map[string]string{"format": "pt"})
	for i, name := range []string{"w0", "w1", "w2", "w3"} {
		v := float32(i)
		f.Tensors[name] = safetensors.FromFloat32([]int{4}, []float32{v, v, v, v})
	}
	if err := safetensors.WriteModel(dir, f, maxShard); err != nil {
		t.Fatal(err)
	}
	return dir
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheckpointKind(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dir     func(t *testing.T) string
		want    policy.Kind
		wantErr string // after the directory
	}{
		{name: "adapter", dir: func(t *testing.T) string { return adapterDir(t, "{}") }, want: policy.KindAdapter},
		{name: "weights in one file", dir: func(t *testing.T) string { return weightsDir(t, 0) }, want: policy.KindWeights},
		{name: "sharded weights", dir: func(t *testing.T) string { return weightsDir(t, 32) }, want: policy.KindWeights},
		{name: "an adapter beside a config wins", dir: func(t *testing.T) string {
			dir := weightsDir(t, 0)
			writeFile(t, filepath.Join(dir, "adapter_config.json"), "{}")
			return dir
		}, want: policy.KindAdapter},
		{name: "config without weights", dir: func(t *testing.T) string {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "config.json"), "{}")
			return dir
		}, wantErr: ": not a policy checkpoint: it holds neither a PEFT adapter (adapter_config.json) nor full weights (config.json with model.safetensors or model.safetensors.index.json); point the policy input at a train task's output or an exported model"},
		{name: "weights without config", dir: func(t *testing.T) string {
			dir := weightsDir(t, 0)
			os.Remove(filepath.Join(dir, "config.json"))
			return dir
		}, wantErr: ": not a policy checkpoint: it holds neither a PEFT adapter (adapter_config.json) nor full weights (config.json with model.safetensors or model.safetensors.index.json); point the policy input at a train task's output or an exported model"},
		{name: "a file", dir: func(t *testing.T) string {
			path := filepath.Join(t.TempDir(), "f")
			writeFile(t, path, "")
			return path
		}, wantErr: ": not a directory: not a policy checkpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir(t)
			got, err := policy.CheckpointKind(dir)
			if tc.wantErr != "" {
				want := "read checkpoint " + dir + tc.wantErr
				if err == nil || err.Error() != want || !errors.Is(err, policy.ErrCheckpoint) {
					t.Fatalf("err = %v, want %q matching ErrCheckpoint", err, want)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("CheckpointKind = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestCheckShards(t *testing.T) {
	const fix = " (the directory is incomplete or mixes two checkpoints; write it again)"
	for _, tc := range []struct {
		name    string
		break_  func(t *testing.T, dir string)
		wantErr string // after "check the shards of <dir>: "
	}{
		{name: "sharded as written"},
		{name: "a shard missing", break_: func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "model-00002-of-00002.safetensors"))
		}, wantErr: "shard model-00002-of-00002.safetensors, named by model.safetensors.index.json, is missing: not a policy checkpoint: shards do not match their index" + fix},
		{name: "a tensor not in its shard", break_: func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, safetensors.IndexFile),
				`{"metadata":{"total_size":64},"weight_map":{"w0":"model-00001-of-00002.safetensors","w1":"model-00001-of-00002.safetensors","w2":"model-00001-of-00002.safetensors","w3":"model-00002-of-00002.safetensors"}}`)
		}, wantErr: "shard model-00001-of-00002.safetensors does not hold tensor w2, which model.safetensors.index.json maps to it: not a policy checkpoint: shards do not match their index" + fix},
		{name: "a shard left out of the index", break_: func(t *testing.T, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, "model-00002-of-00002.safetensors"))
			writeFile(t, filepath.Join(dir, "model-00003-of-00003.safetensors"), string(b))
		}, wantErr: "shard model-00003-of-00003.safetensors is not listed in model.safetensors.index.json: not a policy checkpoint: shards do not match their index" + fix},
		{name: "a shard outside the directory", break_: func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, safetensors.IndexFile), `{"metadata":{"total_size":16},"weight_map":{"w0":"../w.safetensors"}}`)
		}, wantErr: `tensor w0 is mapped to "../w.safetensors", not a file of the directory: not a policy checkpoint: shards do not match their index` + fix},
		{name: "a shard that is not safetensors", break_: func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), "\x02\x00\x00\x00\x00\x00\x00\x00[]")
		}, wantErr: "shard model-00001-of-00002.safetensors: read " + "<dir>" + "/model-00001-of-00002.safetensors: malformed safetensors: header JSON: json: cannot unmarshal array into Go value of type map[string]json.RawMessage: not a policy checkpoint: shards do not match their index" + fix},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := weightsDir(t, 32) // two shards of two tensors
			if tc.break_ != nil {
				tc.break_(t, dir)
			}
			err := policy.CheckShards(dir)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			want := "check the shards of " + dir + ": " + strings.ReplaceAll(tc.wantErr, "<dir>", dir)
			if err == nil || err.Error() != want || !errors.Is(err, policy.ErrShards) || !errors.Is(err, policy.ErrCheckpoint) {
				t.Fatalf("err = %v\nwant %q matching ErrShards", err, want)
			}
		})
	}
	if err := policy.CheckShards(weightsDir(t, 0)); err != nil {
		t.Fatalf("one model.safetensors without an index: %v", err)
	}
}

// fullPolicy loads adapters and full weights, recording the calls.
type fullPolicy struct {
	loaderPolicy
	weightsErr error
}

func (p *fullPolicy) LoadWeights(ctx context.Context, name, dir string) error {
	if p.weightsErr != nil {
		return p.weightsErr
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		return err
	}
	p.calls = append(p.calls, "load "+name)
	return nil
}

func (p *fullPolicy) UnloadWeights(ctx context.Context, name string) error {
	p.calls = append(p.calls, "unload "+name)
	return nil
}

// Adapters and full weights share one loader: the kind of the directory
// picks the policy's loader, the content digest names the checkpoint, and
// eviction and Close unload each through its own loader.
func TestAdaptersLoadWeightsBesideAdapters(t *testing.T) {
	ctx := context.Background()
	p := &fullPolicy{}
	root := t.TempDir()
	a := policy.NewAdapters(p, "test", root, 1)
	wdir := weightsDir(t, 32)
	digest, err := policy.DirDigest(wdir)
	if err != nil {
		t.Fatal(err)
	}
	weights, err := a.Load(ctx, wdir)
	if err != nil {
		t.Fatal(err)
	}
	if want := "weights-" + digest[:12]; weights != want {
		t.Fatalf("name = %q, want %q", weights, want)
	}
	if err := policy.CheckShards(filepath.Join(root, weights)); err != nil {
		t.Fatalf("the copy in root: %v", err)
	}
	adapter, err := a.Load(ctx, adapterDir(t, `{"r":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"load " + weights, "load adapter-3285a77212c0", "unload " + weights, "unload " + adapter}
	if !slices.Equal(p.calls, want) {
		t.Fatalf("calls = %q, want %q", p.calls, want)
	}
	if es, _ := os.ReadDir(root); len(es) != 0 {
		t.Fatalf("root holds %d entries after Close", len(es))
	}
}

func TestAdaptersWeightsErrorsRetryCannotFix(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy policy.Policy
		dir    func(t *testing.T) string
		shape  bool
		msg    string // <dir> and <hex> stand for the directory and its digest's 12 hex
	}{
		{"no weights loader", &loaderPolicy{}, func(t *testing.T) string { return weightsDir(t, 0) }, false,
			"the policy input is a full-weights checkpoint, but policy test cannot load weights (policy.WeightsLoader); train with LoRA or use a policy kind that loads weights"},
		{"shards do not match the index", &fullPolicy{}, func(t *testing.T) string {
			dir := weightsDir(t, 32)
			os.Remove(filepath.Join(dir, "model-00001-of-00002.safetensors"))
			return dir
		}, false, "check the shards of <dir>: shard model-00001-of-00002.safetensors, named by model.safetensors.index.json, is missing: not a policy checkpoint: shards do not match their index (the directory is incomplete or mixes two checkpoints; write it again)"},
		{"not a checkpoint", &fullPolicy{}, func(t *testing.T) string { return t.TempDir() }, false,
			"read checkpoint <dir>: not a policy checkpoint: it holds neither a PEFT adapter (adapter_config.json) nor full weights (config.json with model.safetensors or model.safetensors.index.json); point the policy input at a train task's output or an exported model"},
		{"weights of another model", &fullPolicy{weightsErr: fmt.Errorf("tensor w0 has shape [4], the model needs [8]: %w", policy.ErrWeightsShape)},
			func(t *testing.T) string { return weightsDir(t, 0) }, true,
			"load weights weights-<hex>: tensor w0 has shape [4], the model needs [8]: weights do not match the policy's model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir(t)
			digest, err := policy.DirDigest(dir)
			if err != nil {
				t.Fatal(err)
			}
			_, err = policy.NewAdapters(tc.policy, "test", "", 0).Load(context.Background(), dir)
			want := strings.NewReplacer("<dir>", dir, "<hex>", digest[:12]).Replace(tc.msg)
			if err == nil || err.Error() != want || !errors.Is(err, policy.ErrAdapterInput) || errors.Is(err, policy.ErrWeightsShape) != tc.shape {
				t.Fatalf("err = %v\nwant %q matching ErrAdapterInput (and ErrWeightsShape: %v)", err, want, tc.shape)
			}
		})
	}
}
