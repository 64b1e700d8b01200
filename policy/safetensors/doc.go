// Package safetensors reads and writes the safetensors tensor format and the
// PEFT LoRA adapter directory built on it, the two files every Hugging Face
// tool exchanges weights with.
//
// # The format
//
// A safetensors file is
//
//	u64 little-endian N | N bytes of JSON header | raw tensor data
//
// The header maps each tensor name to its dtype ("F32", "BF16", …), its
// shape and its data_offsets [begin, end) relative to the start of the data
// section; the optional "__metadata__" entry is a map of strings. The
// header is padded with spaces to a multiple of 8 bytes, and the data is
// little-endian and row-major. Unmarshal checks everything a reader relies
// on: the header length, the JSON, known dtypes, offsets inside the data,
// shapes that match their byte sizes, and tensors that tile the data
// section without gaps or overlaps. Its errors wrap ErrFormat and name the
// tensor; ReadFile adds the file name.
//
// Marshal is deterministic: "__metadata__" first, then tensors sorted by
// name, their data in the same order, so equal contents give equal bytes
// (and equal checksums). WriteFile writes to a temporary file in the same
// directory and renames it into place, so a reader never sees half a file.
//
//	f := safetensors.NewFile(map[string]string{"format": "pt"})
//	f.Tensors["w"] = safetensors.FromFloat32([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6})
//	err := safetensors.WriteFile("w.safetensors", f)
//	g, err := safetensors.ReadFile("w.safetensors")
//	w, err := g.Float32("w") // []float32, checked to be F32
//
// # PEFT adapters
//
// A LoRA adapter directory, as PEFT's save_pretrained writes it and vLLM
// loads it, holds adapter_config.json (AdapterConfig: peft_type "LORA", r,
// lora_alpha, target_modules, …) and adapter_model.safetensors with, for
// each adapted linear layer ("module"),
//
//	base_model.model.<module>.lora_A.weight  [r, in]
//	base_model.model.<module>.lora_B.weight  [out, r]
//
// The layer then computes y = x·Wᵀ + (lora_alpha/r)·x·Aᵀ·Bᵀ. WriteAdapterDir
// and ReadAdapterDir exchange a map from module path to its LoRA pair;
// ReadAdapterDir rejects tensors it cannot place (a name outside the
// pattern, a rank other than r, a module with only one of A and B).
package safetensors
