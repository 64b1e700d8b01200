#!/bin/sh
# Make the project-local virtualenv that the OpenAI SDK test runs in
# (.venv-sdk, never committed) from the pinned scripts/sdk-requirements.txt,
# only when it is missing or the pins changed, and print its python.
# Safe to run again; scripts/deps.sh runs it, and so does the test.
#
#   scripts/sdk-venv.sh                  # prints …/.venv-sdk/bin/python
#   RLPIPE_SDK_VENV=DIR scripts/sdk-venv.sh   # keep the venv elsewhere
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${RLPIPE_SDK_VENV:-$root/.venv-sdk}
req=$root/scripts/sdk-requirements.txt
stamp=$venv/.requirements

if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$req" "$stamp"; then
	echo "$venv/bin/python"
	exit 0
fi
if ! command -v python3 >/dev/null 2>&1; then
	echo "sdk-venv: python3 is missing: apt-get install python3 python3-venv (scripts/deps.sh does)" >&2
	exit 1
fi
echo "sdk-venv: creating $venv with $(python3 --version 2>&1) and the pinned openai SDK" >&2
if ! python3 -m venv --clear "$venv" >&2; then
	echo "sdk-venv: python3 -m venv failed: apt-get install python3-venv (scripts/deps.sh does)" >&2
	exit 1
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" >&2
cp "$req" "$stamp"
echo "$venv/bin/python"
