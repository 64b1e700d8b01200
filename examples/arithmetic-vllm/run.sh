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
name=arithmetic-vllm
port=8011 # the endpoint pipeline.yaml names
. "$here/../vllm-serve.sh"
[ -x "$py" ] || { echo "arithmetic-vllm: no venv at $venv: run scripts/py-venv.sh (about 6 GB)" >&2; exit 1; }
work=${1:-$(mktemp -d "${TMPDIR:-/tmp}/arith-vllm.XXXXXX")}
mkdir -p "$work"

"$rlpipe" policy export "$work/model" --model tiny-arith
serve_vllm "$work/model"

run_pipeline arith-vllm
