#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian machine, only when missing.
set -euo pipefail
need=()
command -v bwrap >/dev/null || need+=(bubblewrap)  # sandbox runs checkers in it
# The UI's end-to-end test drives headless Chromium (RLPIPE_CHROMIUM names another browser).
if [ -z "${RLPIPE_CHROMIUM:-}" ] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null && ! command -v google-chrome >/dev/null; then
  need+=(chromium)
fi
# The policy server's test against the official OpenAI SDK runs it in a venv (scripts/sdk-venv.sh).
command -v python3 >/dev/null || need+=(python3)
python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)
# reasoning-gym's pycosat is a C extension PyPI has only as source (scripts/py-venv.sh builds it).
command -v cc >/dev/null || need+=(gcc)
# scripts/py-venv.sh makes .venv-py from /usr/bin/python3 (see there), whose headers are python3-dev's.
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3
"$py" -c 'import os, sysconfig; os.stat(os.path.join(sysconfig.get_path("include"), "Python.h"))' 2>/dev/null || need+=(python3-dev)
command -v go >/dev/null || { echo "deps: Go is not installed: see https://go.dev/doc/install" >&2; exit 1; }
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq && $sudo apt-get install -y -qq "${need[@]}"
fi
# The notebooks, and the Go test that compares their reader of evaluations with the CLI's, run on
# a Python with pandas (scripts/notebook-deps.sh; it may apt-get, so it goes first).
./scripts/notebook-deps.sh >/dev/null
# The venvs are independent of one another: the big one is made beside the small ones, two
# installs at a time for two cores (on a fresh clone this saves a few minutes).
# The real path on CPU: transformers and PEFT check the embedded model's export and adapters,
# vLLM's CPU build serves it, torchrun runs the reference trainer (scripts/py-venv.sh: about 3 GB
# downloaded and 6 GB on disk the first time, a few minutes; reused afterwards).
./scripts/py-venv.sh >/dev/null &
py_venv=$!
trap 'kill "$py_venv" 2>/dev/null || true' EXIT
# The policy server's test against the official OpenAI SDK runs it in a venv (scripts/sdk-venv.sh).
./scripts/sdk-venv.sh >/dev/null
# The notebooks run on the project's data venv (pyarrow, polars, duckdb), and the Hugging Face
# dataset import tests write datasets with its `datasets` package (scripts/data-venv.sh).
./scripts/data-venv.sh >/dev/null
# The tracker tests read TensorBoard event files with TensorBoard's own reader and talk to a real
# MLflow tracking server (scripts/tracker-venv.sh).
./scripts/tracker-venv.sh >/dev/null
# Environments from the ecosystem (issue 38): OpenEnv's servers run on their own venv, its pins
# clashing with vLLM's (scripts/openenv-venv.sh); Harbor, the reference for rlpipe's reading of
# Harbor tasks, needs Python >= 3.12 (scripts/harbor-venv.sh finds one, or says why it skips).
./scripts/openenv-venv.sh >/dev/null
./scripts/harbor-venv.sh >/dev/null
go mod download
wait "$py_venv"
trap - EXIT
