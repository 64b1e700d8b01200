package safetensors_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/rlpipe/rlpipe/policy/safetensors"
)

func Example() {
	dir, err := os.MkdirTemp("", "safetensors-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	f := safetensors.NewFile(map[string]string{"format": "pt"})
	f.Tensors["proj.weight"] = safetensors.FromFloat32([]int{2, 2}, []float32{1, 0, 0, 1})
	path := filepath.Join(dir, "model.safetensors")
	if err := safetensors.WriteFile(path, f); err != nil {
		log.Fatal(err)
	}
	g, err := safetensors.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	w, err := g.Float32("proj.weight")
	fmt.Println(g.Tensors["proj.weight"].Shape, w, err)
	// Output: [2 2] [1 0 0 1] <nil>
}

func ExampleWriteAdapterDir() {
	dir, err := os.MkdirTemp("", "adapter-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	cfg := safetensors.NewAdapterConfig("tiny-arith", 1, 2, []string{"q_proj"})
	mods := map[string]safetensors.LoRA{"layers.0.attn.q_proj": {
		A: safetensors.FromFloat32([]int{1, 2}, []float32{0.1, 0.2}), // [r, in]
		B: safetensors.FromFloat32([]int{2, 1}, []float32{0, 0}),     // [out, r]
	}}
	if err := safetensors.WriteAdapterDir(filepath.Join(dir, "step-1"), cfg, mods); err != nil {
		log.Fatal(err)
	}
	got, modules, err := safetensors.ReadAdapterDir(filepath.Join(dir, "step-1"))
	if err != nil {
		log.Fatal(err)
	}
	a, _ := safetensors.LoRATensorNames("layers.0.attn.q_proj")
	fmt.Println(got.PeftType, got.R, got.Scaling(), len(modules), a)
	// Output: LORA 1 2 1 base_model.model.layers.0.attn.q_proj.lora_A.weight
}

// WriteModel shards a model's weights above a size, as transformers'
// save_pretrained does, and ReadModel reads them back as one file.
func ExampleWriteModel() {
	dir, err := os.MkdirTemp("", "model-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	f := safetensors.NewFile(map[string]string{"format": "pt"})
	f.Tensors["a.weight"] = safetensors.FromFloat32([]int{4}, []float32{1, 2, 3, 4}) // 16 bytes
	f.Tensors["b.weight"] = safetensors.FromFloat32([]int{4}, []float32{5, 6, 7, 8})
	if err := safetensors.WriteModel(dir, f, 16); err != nil {
		log.Fatal(err)
	}
	ix, err := safetensors.ReadIndex(filepath.Join(dir, safetensors.IndexFile))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ix.Metadata.TotalSize, ix.WeightMap["b.weight"])
	g, err := safetensors.ReadModel(dir)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(g.Names())
	// Output:
	// 32 model-00002-of-00002.safetensors
	// [a.weight b.weight]
}
