#!/bin/sh
# The arithmetic run with real vLLM sampling, on the CPU: export the
# embedded model as a Hugging Face Llama, serve it with vLLM (runtime LoRA
# on), and run pipeline.yaml against it in a fresh store. Needs the venv of
# scripts/py-venv.sh ($RLPIPE_PY_VENV or .venv-py at the top of the
# repository) and a built rlpipe (make build).
#
#   examples/arithmetic-vllm/run.sh [WORKDIR]    # WORKDIR: a fresh temp dir
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rlpipe=${RLPIPE:-$root/bin/rlpipe}
venv=${RLPIPE_PY_VENV:-$root/.venv-py}
py=$venv/bin/python
port=8011 # the endpoint pipeline.yaml names
[ -x "$rlpipe" ] || { echo "arithmetic-vllm: $rlpipe is missing: run make build" >&2; exit 1; }
[ -x "$py" ] || { echo "arithmetic-vllm: no venv at $venv: run scripts/py-venv.sh (about 6 GB)" >&2; exit 1; }
work=${1:-$(mktemp -d "${TMPDIR:-/tmp}/arith-vllm.XXXXXX")}
mkdir -p "$work"
server=
cleanup() { [ -n "$server" ] && kill -TERM -- "-$server" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

"$rlpipe" policy export "$work/model" --model tiny-arith

# Its own process group, so that cleanup stops vLLM's engine and worker too.
set -m
VLLM_ALLOW_RUNTIME_LORA_UPDATING=True VLLM_CPU_KVCACHE_SPACE=1 \
	"$py" -m vllm.entrypoints.openai.api_server --host 127.0.0.1 --port "$port" \
	--model "$work/model" --served-model-name tiny-arith --dtype float32 \
	--enable-lora --max-lora-rank 8 >"$work/vllm.log" 2>&1 &
server=$!
set +m
start=$(date +%s)
until "$py" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null; do
	if ! kill -0 "$server" 2>/dev/null || [ $(($(date +%s) - start)) -gt 300 ]; then
		tail -30 "$work/vllm.log" >&2
		echo "arithmetic-vllm: vLLM did not come up on 127.0.0.1:$port (log: $work/vllm.log)" >&2
		exit 1
	fi
	sleep 1
done
echo "arithmetic-vllm: vLLM up after $(($(date +%s) - start)) s"

export RLPIPE_STORE="$work/store"
"$rlpipe" init-store
"$rlpipe" dataset arith main --heldout 200
"$rlpipe" run -f "$here/pipeline.yaml" --no-report
"$rlpipe" status arith-vllm
echo "arithmetic-vllm: store in $RLPIPE_STORE, vLLM's log in $work/vllm.log"
