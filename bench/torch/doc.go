// Package torch compares one GRPO step of rlpipe's reference PyTorch
// trainer (trainers/python/grpo_train.py, transformers and PEFT on the
// CPU, float32) — in one process and under torchrun with two gloo ranks —
// with the embedded Go trainer on the same batch, from the same adapter:
// the step alone (the script's train_seconds) and the whole call (process
// start, imports, model load, outputs), each against the embedded step,
// as ratios measured in the same run. It needs the venv of
// scripts/py-venv.sh and is skipped, saying so, without one.
//
//	go test -run '^$' -bench TorchStep -benchtime 3x ./bench/torch/
package torch
