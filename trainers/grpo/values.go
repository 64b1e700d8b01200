package grpo

import (
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
)

// PPO's critic and per-token values, shared by the trainers that have a
// critic (docs/TRAINERS.md, "PPO with a critic").
const (
	// CriticDir is the adapter output's subdirectory that holds PPO's
	// critic: a PEFT LoRA (adapter_config.json, adapter_model.safetensors),
	// value_head.safetensors and the trainer's critic optimizer state.
	CriticDir = "critic"
	// OutValues is the train task's output of the per-token values,
	// returns and advantages PPO trained on (tables.TokenValues), when the
	// critic is on.
	OutValues = tables.ValuesName
	// ValuesFile is its file, runs.ValuesFile.
	ValuesFile = runs.ValuesFile
)

// ValuesOutput is the train task's values output, checked as a
// tables.TokenValues file.
func ValuesOutput() pipeline.Output {
	return pipeline.Output{Name: OutValues, File: ValuesFile, Check: func(path string) error { return tables.CheckFile(path, tables.TokenValues) }}
}
