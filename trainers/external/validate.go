package external

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"

	"os"
	"path/filepath"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/safetensors"
)

// checkOutputs checks what a trainer that exited 0 left behind, in the
// order a reader needs it, and returns the trainer's metrics object.
// Every error wraps ErrContract and names the flag and the file.
func (p paths) checkOutputs() (map[string]json.RawMessage, error) {
	if err := checkCheckpoint("--adapter-out", p.AdapterOut); err != nil {
		return nil, err
	}
	fi, err := os.Stat(p.OptimizerOut)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: --optimizer-out %s is gone; leave the directory (empty when the trainer keeps no state)", ErrContract, p.OptimizerOut)
	case err != nil:
		return nil, fmt.Errorf("%w: --optimizer-out: %v", ErrContract, err)
	case !fi.IsDir():
		return nil, fmt.Errorf("%w: --optimizer-out %s is a file; it must be a directory (write e.g. optimizer.pt inside it)", ErrContract, p.OptimizerOut)
	}
	return readMetrics(p.MetricsOut)
}

// checkCheckpoint checks the policy checkpoint a trainer wrote to flag:
// full weights (config.json and weights, no adapter_config.json: the
// reference script's lora: none) against their shards' index, anything
// else as a PEFT adapter (checkAdapter). The weights' values are not
// read: a full model is gigabytes, and the reference script refuses a
// non-finite gradient before it writes.
func checkCheckpoint(flag, dir string) error {
	k, err := policy.CheckpointKind(dir)
	if err != nil || k != policy.KindWeights {
		return checkAdapter(flag, dir)
	}
	if err := reservedOptimizerDir(flag, dir); err != nil {
		return err
	}
	if err := policy.CheckShards(dir); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrContract, flag, err)
	}
	return nil
}

// reservedOptimizerDir refuses a checkpoint directory that holds a
// directory named OptimizerDir, which the output keeps for the
// optimizer state.
func reservedOptimizerDir(flag, dir string) error {
	if fi, err := os.Stat(filepath.Join(dir, OptimizerDir)); err == nil && fi.IsDir() {
		return fmt.Errorf("%w: %s %s holds a directory %q, a name the adapter output reserves for --optimizer-out", ErrContract, flag, dir, OptimizerDir)
	}
	return nil
}

// checkAdapter checks that dir, written to flag (--adapter-out, or
// --critic-out for PPO's critic), is a PEFT LoRA adapter directory
// rlpipe's rollout stages can load: both files, a LoRA configuration,
// every tensor named, shaped and finite.
func checkAdapter(flag, dir string) error {
	for _, name := range []string{safetensors.AdapterConfigFile, safetensors.AdapterWeightsFile} {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			hint := ""
			if name == safetensors.AdapterWeightsFile {
				if _, err := os.Stat(filepath.Join(dir, "adapter_model.bin")); err == nil {
					hint = " (it wrote adapter_model.bin: save with save_pretrained(dir, safe_serialization=True))"
				}
			}
			return fmt.Errorf("%w: the trainer exited 0 without writing %s into %s %s%s", ErrContract, name, flag, dir, hint)
		} else if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrContract, flag, err)
		}
	}
	if err := reservedOptimizerDir(flag, dir); err != nil {
		return err
	}
	_, mods, err := safetensors.ReadAdapterDir(dir)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrContract, flag, err)
	}
	if len(mods) == 0 {
		return fmt.Errorf("%w: %s %s: %s holds no LoRA tensors", ErrContract, flag, dir, safetensors.AdapterWeightsFile)
	}
	names := slices.Sorted(maps.Keys(mods))
	wpath := filepath.Join(dir, safetensors.AdapterWeightsFile)
	for _, m := range names {
		an, bn := safetensors.LoRATensorNames(m)
		for _, t := range []struct {
			name string
			t    safetensors.Tensor
		}{{an, mods[m].A}, {bn, mods[m].B}} {
			if i, ok := firstNonFinite(t.t); !ok {
				return fmt.Errorf("%w: %s: %s: tensor %q holds a NaN or infinite value at element %d; the update diverged", ErrContract, flag, wpath, t.name, i)
			}
		}
	}
	return nil
}

// firstNonFinite finds the first NaN or infinity of a floating-point
// tensor; ok is true when there is none (or the dtype is not a float).
func firstNonFinite(t safetensors.Tensor) (int, bool) {
	switch t.DType {
	case safetensors.F32:
		return firstExponentAllOnes(t.Data, 4, 0x7f800000)
	case safetensors.F64:
		return firstExponentAllOnes(t.Data, 8, 0x7ff0000000000000)
	case safetensors.F16:
		return firstExponentAllOnes(t.Data, 2, 0x7c00)
	case safetensors.BF16:
		return firstExponentAllOnes(t.Data, 2, 0x7f80)
	}
	return 0, true
}

// firstExponentAllOnes finds the first little-endian value of size bytes
// in d whose exponent bits (mask) are all set: a NaN or an infinity.
func firstExponentAllOnes(d []byte, size int, mask uint64) (int, bool) {
	for i := 0; i+size <= len(d); i += size {
		var v uint64
		switch size {
		case 2:
			v = uint64(binary.LittleEndian.Uint16(d[i:]))
		case 4:
			v = uint64(binary.LittleEndian.Uint32(d[i:]))
		default:
			v = binary.LittleEndian.Uint64(d[i:])
		}
		if v&mask == mask {
			return i / size, false
		}
	}
	return 0, true
}

// readMetrics reads the trainer's metrics file: a JSON object.
func readMetrics(path string) (map[string]json.RawMessage, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: the trainer exited 0 without writing --metrics-out %s (a JSON object, e.g. {\"loss\": 0.1})", ErrContract, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: --metrics-out: %v", ErrContract, err)
	}
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&m); err != nil || m == nil {
		hint := ""
		if bytes.Contains(b, []byte("NaN")) || bytes.Contains(b, []byte("Infinity")) {
			hint = " (NaN and Infinity are not JSON: write null, e.g. json.dump(m, f, allow_nan=False) after replacing them)"
		}
		if err == nil {
			err = errors.New("null is not an object")
		}
		return nil, fmt.Errorf("%w: --metrics-out %s is not a JSON object: %v%s", ErrContract, path, err, hint)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: --metrics-out %s holds more than one JSON value", ErrContract, path)
	}
	return m, nil
}

// mergeMetrics lays the trainer's metrics over the batch's: a key the
// trainer wrote wins.
func mergeMetrics(batch Metrics, trainer map[string]json.RawMessage) ([]byte, error) {
	b, err := json.Marshal(batch)
	if err != nil {
		return nil, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	for k, v := range trainer {
		all[k] = v
	}
	out, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// checkMetricsFile is the metrics output's Check.
func checkMetricsFile(path string) error {
	_, err := readMetrics(path)
	return err
}
