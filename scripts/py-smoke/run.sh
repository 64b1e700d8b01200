#!/bin/sh
# By-hand smoke test of the real path on CPU, in the venv of scripts/py-venv.sh:
# a tiny random Llama and a LoRA adapter (tiny_llama.py), vLLM's CPU server on
# the loopback with runtime LoRA, its logprobs against transformers/peft
# (check_vllm.py), then torchrun with gloo (allreduce.py). About two minutes.
#
#   scripts/py-smoke/run.sh [PORT]     # PORT defaults to 8011
set -eu
here=$(cd "$(dirname "$0")" && pwd)
py=$("$here/../py-venv.sh")
bin=$(dirname "$py")
port=${1:-8011}
tmp=$(mktemp -d)
server=
cleanup() {
	[ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

"$py" "$here/tiny_llama.py" "$tmp"

start=$(date +%s)
VLLM_ALLOW_RUNTIME_LORA_UPDATING=True VLLM_CPU_KVCACHE_SPACE=1 \
	"$py" -m vllm.entrypoints.openai.api_server --host 127.0.0.1 --port "$port" \
	--model "$tmp/model" --served-model-name tiny --dtype float32 \
	--max-model-len 256 --enable-lora --max-lora-rank 8 >"$tmp/server.log" 2>&1 &
server=$!
while ! "$py" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null; do
	if ! kill -0 "$server" 2>/dev/null || [ $(($(date +%s) - start)) -gt 300 ]; then
		tail -30 "$tmp/server.log" >&2
		echo "smoke: the vLLM server did not come up" >&2
		exit 1
	fi
	sleep 1
done
echo "smoke: vLLM up after $(($(date +%s) - start)) s"
"$py" "$here/check_vllm.py" "http://127.0.0.1:$port" "$tmp"
kill "$server"
wait "$server" 2>/dev/null || true
server=

"$bin/torchrun" --standalone --nproc_per_node 2 "$here/allreduce.py"
echo "smoke: ok"
