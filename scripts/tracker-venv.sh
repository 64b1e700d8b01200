#!/bin/sh
# Make the project-local virtualenv of the experiment trackers (.venv-tracking,
# never committed) from the pinned scripts/tracker-requirements.txt: TensorBoard,
# whose own event reader reads rlpipe's event files back in a test, and MLflow,
# whose tracking server the MLflow tests start on loopback, and wandb, which
# the wandb tracker writes through (its reader reads the runs back in a
# test). Only when it is
# missing or the pins changed; prints its python. About 40 s and 900 MB from
# PyPI. Safe to run again; scripts/deps.sh runs it. The tests never do: they
# are skipped, naming this script, without the venv (internal/pyvenv).
#
#   scripts/tracker-venv.sh                        # prints …/.venv-tracking/bin/python
#   RLPIPE_TRACKER_VENV=DIR scripts/tracker-venv.sh  # keep the venv elsewhere
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
exec "$root/scripts/pinned-venv.sh" "${RLPIPE_TRACKER_VENV:-$root/.venv-tracking}" "$root/scripts/tracker-requirements.txt" \
	"TensorBoard, MLflow and wandb"
