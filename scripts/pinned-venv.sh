#!/bin/sh
# Make a project-local virtualenv from a pinned requirements file, only when
# it is missing or the pins changed, and print its python. Safe to run again.
# The small venvs' scripts call it (sdk-venv.sh, data-venv.sh):
#
#   scripts/pinned-venv.sh VENV_DIR REQUIREMENTS WHAT
#
# WHAT says what the venv is for, in the line printed while it is made.
set -eu
venv=$1 req=$2 what=$3
name=$(basename "$venv")
stamp=$venv/.requirements
. "$(dirname "$0")/venv.sh"

venv_current
venv_create " and $what"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --only-binary :all: -r "$req" >&2
venv_stamp
