#!/bin/sh
# Install a headless browser for the UI's end-to-end test (go test ./ui/...):
# Debian's chromium package, when no chromium is on the PATH. Safe to run
# again; exits 0 when a browser is present afterwards.
#
#   scripts/browser-deps.sh            # install if missing
#   RLPIPE_CHROMIUM=/path/to/chrome    # use another browser; nothing installed
set -eu

if [ -n "${RLPIPE_CHROMIUM:-}" ]; then
	if [ -x "$RLPIPE_CHROMIUM" ]; then
		echo "browser-deps: using $RLPIPE_CHROMIUM"
		exit 0
	fi
	echo "browser-deps: RLPIPE_CHROMIUM=$RLPIPE_CHROMIUM is not an executable" >&2
	exit 1
fi

for b in chromium chromium-browser google-chrome; do
	if command -v "$b" >/dev/null 2>&1; then
		echo "browser-deps: $(command -v "$b") is installed"
		exit 0
	fi
done

name=browser-deps
no_apt="no chromium and no apt-get: install Chromium or Chrome and set RLPIPE_CHROMIUM to it"
no_root="installing chromium needs root (or sudo): apt-get install -y chromium"
installing=chromium
. "$(dirname "$0")/apt-get.sh"
$sudo apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
command -v chromium
