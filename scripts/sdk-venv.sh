#!/bin/sh
# Make the project-local virtualenv that the OpenAI SDK test runs in
# (.venv-sdk, never committed) from the pinned scripts/sdk-requirements.txt,
# only when it is missing or the pins changed, and print its python.
# Safe to run again; scripts/deps.sh runs it. The test never does: it is
# skipped, naming this script, without the venv (internal/pyvenv).
#
#   scripts/sdk-venv.sh                  # prints …/.venv-sdk/bin/python
#   RLPIPE_SDK_VENV=DIR scripts/sdk-venv.sh   # keep the venv elsewhere
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
exec "$root/scripts/pinned-venv.sh" "${RLPIPE_SDK_VENV:-$root/.venv-sdk}" "$root/scripts/sdk-requirements.txt" "the pinned openai SDK"
