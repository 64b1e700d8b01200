package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The files of a PEFT adapter directory.
const (
	AdapterConfigFile  = "adapter_config.json"
	AdapterWeightsFile = "adapter_model.safetensors"
)

// ErrAdapter is wrapped by errors about an adapter directory whose files
// parse but do not form a LoRA adapter.
var ErrAdapter = errors.New("invalid LoRA adapter")

// AdapterConfig is adapter_config.json, with the fields PEFT and vLLM read
// for a LoRA adapter.
type AdapterConfig struct {
	PeftType            string   `json:"peft_type"`
	TaskType            string   `json:"task_type"`
	BaseModelNameOrPath string   `json:"base_model_name_or_path"`
	R                   int      `json:"r"`
	LoraAlpha           float64  `json:"lora_alpha"`
	LoraDropout         float64  `json:"lora_dropout"`
	TargetModules       []string `json:"target_modules"`
	Bias                string   `json:"bias"`
	FanInFanOut         bool     `json:"fan_in_fan_out"`
	InferenceMode       bool     `json:"inference_mode"`
}

// NewAdapterConfig returns the configuration of a causal-LM LoRA adapter
// of rank r and scale alpha over the given target modules (module name
// suffixes such as "q_proj"), with PEFT's defaults for the rest: no
// dropout, no bias, weights not transposed.
func NewAdapterConfig(base string, r int, alpha float64, targets []string) AdapterConfig {
	return AdapterConfig{
		PeftType:            "LORA",
		TaskType:            "CAUSAL_LM",
		BaseModelNameOrPath: base,
		R:                   r,
		LoraAlpha:           alpha,
		TargetModules:       append([]string(nil), targets...),
		Bias:                "none",
		InferenceMode:       true,
	}
}

// Scaling returns lora_alpha / r, the factor applied to B·A.
func (c AdapterConfig) Scaling() float64 { return c.LoraAlpha / float64(c.R) }

// Validate reports a configuration this package cannot honour.
func (c AdapterConfig) Validate() error {
	switch {
	case c.PeftType != "LORA":
		return fmt.Errorf("%w: peft_type is %q, want LORA", ErrAdapter, c.PeftType)
	case c.R <= 0:
		return fmt.Errorf("%w: r is %d; it must be at least 1", ErrAdapter, c.R)
	case c.FanInFanOut:
		return fmt.Errorf("%w: fan_in_fan_out is set; only false is supported", ErrAdapter)
	case c.Bias != "" && c.Bias != "none":
		return fmt.Errorf("%w: bias is %q; only \"none\" is supported", ErrAdapter, c.Bias)
	}
	return nil
}

// LoRA is the pair of low-rank factors of one adapted linear layer: A is
// [r, in] and B is [out, r].
type LoRA struct {
	A, B Tensor
}

const (
	loraPrefix = "base_model.model."
	loraASuf   = ".lora_A.weight"
	loraBSuf   = ".lora_B.weight"
)

// LoRATensorNames returns the tensor names of module's A and B factors in
// adapter_model.safetensors.
func LoRATensorNames(module string) (a, b string) {
	return loraPrefix + module + loraASuf, loraPrefix + module + loraBSuf
}

// ParseLoRATensorName splits a tensor name of an adapter file into its
// module path and factor ("A" or "B"); ok is false for any other name.
func ParseLoRATensorName(name string) (module, factor string, ok bool) {
	rest, found := strings.CutPrefix(name, loraPrefix)
	if !found {
		return "", "", false
	}
	if m, found := strings.CutSuffix(rest, loraASuf); found && m != "" {
		return m, "A", true
	}
	if m, found := strings.CutSuffix(rest, loraBSuf); found && m != "" {
		return m, "B", true
	}
	return "", "", false
}

// WriteAdapterDir writes a PEFT adapter directory: the LoRA factors of
// each module (keyed by module path) to adapter_model.safetensors, then
// cfg to adapter_config.json. Each file is written atomically, the
// configuration last; a directory that did not exist appears with both
// files at once. Files and directories are synced.
func WriteAdapterDir(dir string, cfg AdapterConfig, modules map[string]LoRA) error {
	return WriteAdapterDirWith(dir, cfg, modules, nil)
}

// WriteAdapterDirWith is WriteAdapterDir with options (nil:
// WriteAdapterDir's).
func WriteAdapterDirWith(dir string, cfg AdapterConfig, modules map[string]LoRA, o *WriteOptions) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("write adapter %s: %w", dir, err)
	}
	f := NewFile(map[string]string{"format": "pt"})
	for m, l := range modules {
		if err := checkLoRA(cfg.R, m, l); err != nil {
			return fmt.Errorf("write adapter %s: %w", dir, err)
		}
		an, bn := LoRATensorNames(m)
		f.Tensors[an] = l.A
		f.Tensors[bn] = l.B
	}
	weights, err := Marshal(f)
	if err != nil {
		return fmt.Errorf("write adapter %s: %w", dir, err)
	}
	conf, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("write adapter %s: %w", dir, err)
	}
	conf = append(conf, '\n')

	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		// Build the directory beside its final place and rename it in.
		parent := filepath.Dir(filepath.Clean(dir))
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return fmt.Errorf("write adapter %s: %w", dir, err)
		}
		tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-*")
		if err != nil {
			return fmt.Errorf("write adapter %s: %w", dir, err)
		}
		if err := writeAdapterFiles(tmp, weights, conf, o); err != nil {
			os.RemoveAll(tmp)
			return fmt.Errorf("write adapter %s: %w", dir, err)
		}
		if err := os.Chmod(tmp, 0o755); err != nil {
			os.RemoveAll(tmp)
			return fmt.Errorf("write adapter %s: %w", dir, err)
		}
		if err := os.Rename(tmp, dir); err == nil {
			if o.sync() {
				syncDir(parent)
			}
			return nil
		}
		os.RemoveAll(tmp) // someone created dir meanwhile: replace its files
	}
	if err := writeAdapterFiles(dir, weights, conf, o); err != nil {
		return fmt.Errorf("write adapter %s: %w", dir, err)
	}
	return nil
}

func writeAdapterFiles(dir string, weights, conf []byte, o *WriteOptions) error {
	if err := writeFileAtomic(filepath.Join(dir, AdapterWeightsFile), weights, o); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, AdapterConfigFile), conf, o)
}

// ReadAdapterDir reads a PEFT LoRA adapter directory and returns its
// configuration and the factors of each module, keyed by module path.
// Errors name the file and the tensor.
func ReadAdapterDir(dir string) (AdapterConfig, map[string]LoRA, error) {
	var cfg AdapterConfig
	cpath := filepath.Join(dir, AdapterConfigFile)
	b, err := os.ReadFile(cpath)
	if err != nil {
		return cfg, nil, fmt.Errorf("read adapter: %w", err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return cfg, nil, fmt.Errorf("read adapter %s: %w: %v", cpath, ErrAdapter, err)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, nil, fmt.Errorf("read adapter %s: %w", cpath, err)
	}
	wpath := filepath.Join(dir, AdapterWeightsFile)
	f, err := ReadFile(wpath)
	if err != nil {
		return cfg, nil, fmt.Errorf("read adapter: %w", err)
	}
	modules := map[string]LoRA{}
	for _, name := range f.Names() {
		m, factor, ok := ParseLoRATensorName(name)
		if !ok {
			return cfg, nil, fmt.Errorf("read adapter %s: %w: tensor %q is not named base_model.model.<module>.lora_{A,B}.weight", wpath, ErrAdapter, name)
		}
		l := modules[m]
		if factor == "A" {
			l.A = f.Tensors[name]
		} else {
			l.B = f.Tensors[name]
		}
		modules[m] = l
	}
	ms := make([]string, 0, len(modules))
	for m := range modules {
		ms = append(ms, m)
	}
	sort.Strings(ms)
	for _, m := range ms {
		if err := checkLoRA(cfg.R, m, modules[m]); err != nil {
			return cfg, nil, fmt.Errorf("read adapter %s: %w", wpath, err)
		}
	}
	return cfg, modules, nil
}

// checkLoRA checks that a module's factors exist and have the shapes
// [r, in] and [out, r].
func checkLoRA(r int, module string, l LoRA) error {
	an, bn := LoRATensorNames(module)
	switch {
	case l.A.DType == "":
		return fmt.Errorf("%w: module %q has %s but no %s", ErrAdapter, module, bn, an)
	case l.B.DType == "":
		return fmt.Errorf("%w: module %q has %s but no %s", ErrAdapter, module, an, bn)
	case len(l.A.Shape) != 2 || l.A.Shape[0] != r:
		return fmt.Errorf("%w: tensor %q has shape %v, want [%d, in]", ErrAdapter, an, l.A.Shape, r)
	case len(l.B.Shape) != 2 || l.B.Shape[1] != r:
		return fmt.Errorf("%w: tensor %q has shape %v, want [out, %d]", ErrAdapter, bn, l.B.Shape, r)
	}
	return nil
}
