#!/bin/sh
# Make the project-local virtualenv of the Python data stack (.venv-data,
# never committed) from the pinned scripts/data-requirements.txt: Hugging
# Face datasets, pyarrow, polars, duckdb, pandas, matplotlib, nbconvert and
# ipykernel; only when it is missing or the pins changed; print its python.
# The notebooks run on it (scripts/notebooks.sh), and the dataset import test
# writes Hugging Face datasets with it. About 50 s and 850 MB from PyPI.
# Safe to run again; scripts/deps.sh runs it. The tests never do: they are
# skipped, naming this script, without the venv (internal/pyvenv).
#
#   scripts/data-venv.sh                     # prints …/.venv-data/bin/python
#   RLPIPE_DATA_VENV=DIR scripts/data-venv.sh  # keep the venv elsewhere
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
exec "$root/scripts/pinned-venv.sh" "${RLPIPE_DATA_VENV:-$root/.venv-data}" "$root/scripts/data-requirements.txt" \
	"Hugging Face datasets, pyarrow, polars, duckdb and Jupyter's nbconvert"
