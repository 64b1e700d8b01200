#!/bin/sh
# Make the project-local virtualenv of OpenEnv (.venv-openenv, never
# committed) from the pinned scripts/openenv-requirements.txt, only when it
# is missing or the pins changed; prints its python. About 450 MB from PyPI.
# Safe to run again; scripts/deps.sh runs it. The tests never do: they are
# skipped, naming this script, without the venv (internal/pyvenv).
#
#   scripts/openenv-venv.sh                          # prints …/.venv-openenv/bin/python
#   RLPIPE_OPENENV_VENV=DIR scripts/openenv-venv.sh  # keep the venv elsewhere
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
exec "$root/scripts/pinned-venv.sh" "${RLPIPE_OPENENV_VENV:-$root/.venv-openenv}" "$root/scripts/openenv-requirements.txt" \
	"OpenEnv"
