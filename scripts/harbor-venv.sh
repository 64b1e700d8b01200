#!/bin/sh
# Make the project-local virtualenv of Harbor (.venv-harbor, never committed)
# from the pinned scripts/harbor-requirements.txt, only when it is missing or
# the pins changed; prints its python. About 460 MB from PyPI. Safe to run
# again; scripts/deps.sh runs it. The tests never do: they are skipped,
# naming this script, without the venv (internal/pyvenv).
#
# Harbor needs Python >= 3.12, which Debian 12's python3 (3.11) is not. The
# interpreter is, in order: $RLPIPE_PY312; python3.12 or python3.13 on PATH;
# the oldest pyenv 3.12+ (the lock was made on 3.12) under $PYENV_ROOT (default ~/.pyenv). Without one
# the script says so and exits 0 (deps goes on; the Harbor reference tests
# skip): rlpipe itself reads Harbor tasks without Harbor.
#
#   scripts/harbor-venv.sh                         # prints …/.venv-harbor/bin/python
#   RLPIPE_HARBOR_VENV=DIR scripts/harbor-venv.sh  # keep the venv elsewhere
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
ok() { "$1" -c 'import sys, ensurepip, venv; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; }
base=${RLPIPE_PY312:-}
if [ -z "$base" ]; then
	for c in python3.12 python3.13; do
		if command -v "$c" >/dev/null 2>&1 && ok "$(command -v "$c")"; then base=$(command -v "$c"); break; fi
	done
fi
if [ -z "$base" ]; then
	for c in $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]* 2>/dev/null | sort -V); do
		if ok "$c/bin/python3"; then base=$c/bin/python3; break; fi
	done
fi
if [ -z "$base" ] || ! ok "$base"; then
	echo "harbor-venv: no Python >= 3.12 found (set RLPIPE_PY312, or install python3.12): the Harbor reference tests will skip" >&2
	exit 0
fi
export base
exec "$root/scripts/pinned-venv.sh" "${RLPIPE_HARBOR_VENV:-$root/.venv-harbor}" "$root/scripts/harbor-requirements.txt" \
	"Harbor"
