#!/bin/sh
# The arithmetic run in the production topology on the CPU: export the
# embedded model as a Hugging Face Llama beside pipeline.yaml, serve it with
# vLLM (runtime LoRA on), and run pipeline.yaml — sampled by vLLM, trained
# by grpo_train.py under torchrun (two gloo ranks) — in a fresh store.
# Needs the venv of scripts/py-venv.sh ($RLPIPE_PY_VENV or .venv-py at the
# top of the repository) and a built rlpipe (make build).
#
#   examples/arithmetic-torch/run.sh [WORKDIR]    # WORKDIR: a fresh temp dir
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rlpipe=${RLPIPE:-$root/bin/rlpipe}
venv=${RLPIPE_PY_VENV:-$root/.venv-py}
py=$venv/bin/python
port=8012 # the endpoint pipeline.yaml names
[ -x "$rlpipe" ] || { echo "arithmetic-torch: $rlpipe is missing: run make build" >&2; exit 1; }
[ -x "$py" ] && [ -x "$venv/bin/torchrun" ] || { echo "arithmetic-torch: no venv with torchrun at $venv: run scripts/py-venv.sh (about 6 GB)" >&2; exit 1; }
work=${1:-$(mktemp -d "${TMPDIR:-/tmp}/arith-torch.XXXXXX")}
mkdir -p "$work"
server=
cleanup() { [ -n "$server" ] && kill -TERM -- "-$server" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

# pipeline.yaml's base_model: the export beside it (ignored by git).
"$rlpipe" policy export "$here/tiny-arith" --model tiny-arith

# Its own process group, so that cleanup stops vLLM's engine and worker too.
set -m
VLLM_ALLOW_RUNTIME_LORA_UPDATING=True VLLM_CPU_KVCACHE_SPACE=1 \
	"$py" -m vllm.entrypoints.openai.api_server --host 127.0.0.1 --port "$port" \
	--model "$here/tiny-arith" --served-model-name tiny-arith --dtype float32 \
	--enable-lora --max-lora-rank 8 >"$work/vllm.log" 2>&1 &
server=$!
set +m
start=$(date +%s)
until "$py" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null; do
	if ! kill -0 "$server" 2>/dev/null || [ $(($(date +%s) - start)) -gt 300 ]; then
		tail -30 "$work/vllm.log" >&2
		echo "arithmetic-torch: vLLM did not come up on 127.0.0.1:$port (log: $work/vllm.log)" >&2
		exit 1
	fi
	sleep 1
done
echo "arithmetic-torch: vLLM up after $(($(date +%s) - start)) s"

# pipeline.yaml runs `torchrun`: the venv's, first on the PATH.
export PATH="$venv/bin:$PATH"
export RLPIPE_STORE="$work/store"
"$rlpipe" init-store
"$rlpipe" dataset arith main --heldout 200
"$rlpipe" run -f "$here/pipeline.yaml" --no-report
"$rlpipe" status arith-torch
echo "arithmetic-torch: store in $RLPIPE_STORE, vLLM's log in $work/vllm.log"
