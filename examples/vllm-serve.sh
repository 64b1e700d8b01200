# Sourced by the run.sh of arithmetic-vllm and arithmetic-torch (POSIX sh),
# after they set here (their folder), name (the prefix of their messages)
# and port (the endpoint their pipeline.yaml names). It sets root (the
# checkout), rlpipe (the command: $RLPIPE, or bin/rlpipe in the checkout),
# venv and py (the venv of scripts/py-venv.sh: $RLPIPE_PY_VENV or .venv-py),
# exits 1 when the command is missing, and stops the server serve_vllm
# starts when the script ends; run_pipeline then runs pipeline.yaml.
root=$(cd "$here/../.." && pwd)
rlpipe=${RLPIPE:-$root/bin/rlpipe}
venv=${RLPIPE_PY_VENV:-$root/.venv-py}
py=$venv/bin/python
[ -x "$rlpipe" ] || { echo "$name: $rlpipe is missing: run make build" >&2; exit 1; }
server=
# dash's kill takes no "--": a negative pid names the process group.
cleanup() { [ -n "$server" ] && kill -TERM "-$server" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

# serve_vllm serves the Hugging Face model in directory $1 as tiny-arith on
# 127.0.0.1:$port (runtime LoRA on, its log in $work/vllm.log) and waits up
# to 300 s for it to answer /health; a server that ends or does not answer
# in time makes the script exit 1 with the log's tail.
serve_vllm() {
	# Its own process group, so that cleanup stops vLLM's engine and worker
	# too: setsid, since set -m needs a terminal. Development mode opens
	# /collective_rpc, through which a run with lora: none reloads the
	# weights it trains (on the loopback only).
	VLLM_ALLOW_RUNTIME_LORA_UPDATING=True VLLM_CPU_KVCACHE_SPACE=1 VLLM_SERVER_DEV_MODE=1 \
		setsid "$py" -m vllm.entrypoints.openai.api_server --host 127.0.0.1 --port "$port" \
		--model "$1" --served-model-name tiny-arith --dtype float32 \
		--enable-lora --max-lora-rank 8 --logprobs-mode processed_logprobs >"$work/vllm.log" 2>&1 &
	server=$!
	start=$(date +%s)
	until "$py" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null; do
		if ! kill -0 "$server" 2>/dev/null || [ $(($(date +%s) - start)) -gt 300 ]; then
			tail -30 "$work/vllm.log" >&2
			echo "$name: vLLM did not come up on 127.0.0.1:$port (log: $work/vllm.log)" >&2
			exit 1
		fi
		sleep 1
	done
	echo "$name: vLLM up after $(($(date +%s) - start)) s"
}

# run_pipeline runs $here/pipeline.yaml, whose run is named $1, in a fresh
# store under $work with the arithmetic dataset, prints the run's status
# and says where the store and vLLM's log are.
run_pipeline() {
	export RLPIPE_STORE="$work/store"
	"$rlpipe" init-store
	"$rlpipe" dataset arith main --heldout 200
	"$rlpipe" run -f "$here/pipeline.yaml" --no-report
	"$rlpipe" status "$1"
	echo "$name: store in $RLPIPE_STORE, vLLM's log in $work/vllm.log"
}
