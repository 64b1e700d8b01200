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

# demo_dir VAR sets dir to the demo's directory, $VAR or else .rlpipe-$name
# in the checkout, makes it afresh and exports RLPIPE_STORE as the store in
# it. It removes dir only when a demo made it (its marker file says so),
# else exits 1 saying VAR moves it.
demo_dir() {
  local var="$1"
  dir="${!var:-$root/.rlpipe-$name}"
  local marker="$dir/MADE-BY-RLPIPE-DEMO"
  if [ -e "$dir" ] && [ ! -e "$marker" ]; then
    echo "$name: $dir exists and was not made by the demo; move it away or set $var" >&2
    exit 1
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  printf 'scripts/%s.sh made this directory and removes it at its next run.\n' "$name" >"$marker"
  export RLPIPE_STORE="$dir/store"
}
