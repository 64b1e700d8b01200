# Sourced by the demo scripts (bash), after they set name (the prefix of
# their messages) and build (what makes the command, as the user types
# it): sets root (the checkout) and bin (the rlpipe command: $RLPIPE, or
# bin/rlpipe in the checkout), or exits 1 saying how to build it.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${RLPIPE:-$root/bin/rlpipe}"
if [ ! -x "$bin" ]; then
  echo "$name: $bin is missing: run $build" >&2
  exit 1
fi
