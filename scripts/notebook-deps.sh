#!/bin/sh
# Install what scripts/notebooks.sh needs to execute the notebooks headlessly,
# only when it is missing: Debian's nbconvert, pandas, matplotlib and
# ipykernel for /usr/bin/python3. Safe to run again.
#
#   scripts/notebook-deps.sh               # install if missing
#   RLPIPE_PYTHON=/path/to/python3         # use another Python; nothing installed
#
# Debian (bookworm) packages no Parquet reader for Python, so the notebooks
# read tables through `rlpipe export --format jsonl` there; with pyarrow,
# polars or duckdb installed they read Parquet directly.
set -eu

mods="nbconvert ipykernel pandas matplotlib"
check() { "$1" -c "import sys, importlib.util as u; sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))" $mods 2>/dev/null; }

if [ -n "${RLPIPE_PYTHON:-}" ]; then
	if check "$RLPIPE_PYTHON"; then
		echo "notebook-deps: using $RLPIPE_PYTHON"
		exit 0
	fi
	echo "notebook-deps: RLPIPE_PYTHON=$RLPIPE_PYTHON lacks one of: $mods (pip install $mods)" >&2
	exit 1
fi

if [ -x /usr/bin/python3 ] && check /usr/bin/python3; then
	echo "notebook-deps: /usr/bin/python3 has $mods"
	exit 0
fi

name=notebook-deps
no_apt="no apt-get: pip install $mods, then set RLPIPE_PYTHON to that python"
no_root="installing needs root (or sudo): apt-get install -y python3 jupyter-nbconvert python3-ipykernel python3-pandas python3-matplotlib"
installing="jupyter-nbconvert, python3-ipykernel, python3-pandas, python3-matplotlib"
. "$(dirname "$0")/apt-get.sh"
# python3-nbconvert is the library; jupyter-nbconvert adds the command. Older
# releases ship only python3-nbconvert, so fall back to it.
pkgs="python3 python3-ipykernel python3-pandas python3-matplotlib"
if apt-cache show jupyter-nbconvert >/dev/null 2>&1; then pkgs="$pkgs jupyter-nbconvert"; else pkgs="$pkgs python3-nbconvert"; fi
$sudo apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
check /usr/bin/python3 || { echo "notebook-deps: /usr/bin/python3 still lacks one of: $mods" >&2; exit 1; }
echo "notebook-deps: installed"
