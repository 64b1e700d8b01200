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

if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$req" "$stamp"; then
	echo "$venv/bin/python"
	exit 0
fi
if ! command -v python3 >/dev/null 2>&1; then
	echo "$name: python3 is missing: apt-get install python3 python3-venv (scripts/deps.sh does)" >&2
	exit 1
fi
echo "$name: creating $venv with $(python3 --version 2>&1) and $what" >&2
if ! python3 -m venv --clear "$venv" >&2; then
	echo "$name: python3 -m venv failed: apt-get install python3-venv (scripts/deps.sh does)" >&2
	exit 1
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check --only-binary :all: -r "$req" >&2
cp "$req" "$stamp"
echo "$venv/bin/python"
