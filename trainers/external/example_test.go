package external_test

import (
	"fmt"
	"time"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/trainers/external"
)

// The train stage of a loop whose trainer is the reference script under
// torchrun on 8 GPUs.
func ExampleTask() {
	train, err := external.Task(external.Options{
		Command: []string{"torchrun", "--standalone", "--nproc_per_node", "8", "trainers/python/grpo_train.py"},
		Hyperparameters: map[string]any{
			"base_model": "Qwen/Qwen2.5-1.5B-Instruct",
			"lora":       map[string]any{"rank": 16, "alpha": 32},
			"lr":         1e-5,
			"beta":       0.03,
		},
		Env:     map[string]string{"HF_HOME": "/data/hf"},
		Timeout: 2 * time.Hour,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	stages := pipeline.Stages{Train: train} // with Sample, Generate and Reward
	fmt.Println(stages.Train.Name, stages.Train.Env)
	for _, o := range train.Outputs {
		fmt.Println(o.Name, o.File)
	}
	// Output:
	// train train
	// adapter adapter
	// metrics train_metrics.json
	// advantages advantages.parquet
}
