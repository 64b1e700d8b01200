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
name=arithmetic-torch
port=8012 # the endpoint pipeline.yaml names
. "$here/../vllm-serve.sh"
[ -x "$py" ] && [ -x "$venv/bin/torchrun" ] || { echo "arithmetic-torch: no venv with torchrun at $venv: run scripts/py-venv.sh (about 6 GB)" >&2; exit 1; }
work=${1:-$(mktemp -d "${TMPDIR:-/tmp}/arith-torch.XXXXXX")}
mkdir -p "$work"

# pipeline.yaml's base_model: the export beside it (ignored by git).
"$rlpipe" policy export "$here/tiny-arith" --model tiny-arith
serve_vllm "$here/tiny-arith"

# pipeline.yaml runs `torchrun`: the venv's, first on the PATH.
export PATH="$venv/bin:$PATH"
run_pipeline arith-torch
