package safetensors

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func testModules() map[string]LoRA {
	return map[string]LoRA{
		"layers.0.attn.q_proj": {
			A: FromFloat32([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6}),
			B: FromFloat32([]int{4, 2}, make([]float32, 8)),
		},
		"layers.0.mlp.up_proj": {
			A: FromFloat32([]int{2, 4}, make([]float32, 8)),
			B: FromFloat32([]int{1, 2}, []float32{0.5, -0.5}),
		},
	}
}

func TestAdapterDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "adapters", "v1")
	cfg := NewAdapterConfig("tiny-arith", 2, 4, []string{"q_proj", "up_proj"})
	if err := WriteAdapterDir(dir, cfg, testModules()); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, AdapterConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 2.0, "lora_alpha": 4.0,
		"lora_dropout": 0.0, "bias": "none", "fan_in_fan_out": false, "base_model_name_or_path": "tiny-arith"} {
		if m[k] != want {
			t.Errorf("adapter_config.json %s = %v, want %v", k, m[k], want)
		}
	}
	f, err := ReadFile(filepath.Join(dir, AdapterWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"base_model.model.layers.0.attn.q_proj.lora_A.weight",
		"base_model.model.layers.0.attn.q_proj.lora_B.weight",
		"base_model.model.layers.0.mlp.up_proj.lora_A.weight",
		"base_model.model.layers.0.mlp.up_proj.lora_B.weight",
	}
	if got := f.Names(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("tensor names %v, want %v", got, want)
	}

	got, mods, err := ReadAdapterDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Scaling() != 2 || len(mods) != 2 {
		t.Errorf("scaling %v, %d modules", got.Scaling(), len(mods))
	}
	a, _ := mods["layers.0.attn.q_proj"].A.Float32()
	if a[5] != 6 {
		t.Errorf("q_proj A = %v", a)
	}
	// Overwriting an existing directory leaves no temporary files.
	if err := WriteAdapterDir(dir, cfg, testModules()); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Dir(dir))
	if len(ents) != 1 {
		t.Errorf("left behind: %v", ents)
	}
	ents, _ = os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("adapter dir holds %v", ents)
	}
}

func TestAdapterDirErrors(t *testing.T) {
	cfg := NewAdapterConfig("base", 2, 4, []string{"q_proj"})
	write := func(t *testing.T, cfg AdapterConfig, f *File) string {
		dir := t.TempDir()
		b, _ := json.Marshal(cfg)
		os.WriteFile(filepath.Join(dir, AdapterConfigFile), b, 0o644)
		if err := WriteFile(filepath.Join(dir, AdapterWeightsFile), f); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	one := func(name string, shape []int) *File {
		f := NewFile(nil)
		f.Tensors[name] = FromFloat32(shape, make([]float32, numElements(shape)))
		return f
	}
	an, bn := LoRATensorNames("m")
	both := one(an, []int{2, 3})
	both.Tensors[bn] = FromFloat32([]int{3, 3}, make([]float32, 9))
	cases := []struct {
		name string
		cfg  AdapterConfig
		f    *File
		want string
	}{
		{"unknown name", cfg, one("model.m.weight", []int{2, 3}), `tensor "model.m.weight" is not named`},
		{"A alone", cfg, one(an, []int{2, 3}), `module "m" has ` + an + " but no " + bn},
		{"wrong rank", cfg, one(bn, []int{3, 3}), `module "m" has ` + bn + " but no"},
		{"B rank", cfg, both, `tensor "` + bn + `" has shape [3 3], want [out, 2]`},
		{"not lora", AdapterConfig{PeftType: "IA3", R: 2}, both, "peft_type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := write(t, c.cfg, c.f)
			_, _, err := ReadAdapterDir(dir)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrAdapter) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
				t.Errorf("error %q: want ErrAdapter, %q and the directory", err, c.want)
			}
		})
	}
	if _, _, err := ReadAdapterDir(t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("empty dir: %v", err)
	}
}

func TestParseLoRATensorName(t *testing.T) {
	for name, want := range map[string]string{
		"base_model.model.layers.1.mlp.down_proj.lora_B.weight": "layers.1.mlp.down_proj B",
		"base_model.model.x.lora_A.weight":                      "x A",
		"base_model.model..lora_A.weight":                       "",
		"layers.1.lora_A.weight":                                "",
	} {
		m, f, ok := ParseLoRATensorName(name)
		got := ""
		if ok {
			got = m + " " + f
		}
		if got != want {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
}
