#!/usr/bin/env bash
# The demo through the lakeFS backend, against `rlpipe store serve` with
# lakeFS's staged-read race injected (every commit holds a window during
# which reads of the objects it is committing answer 404, as a real
# lakeFS answers some of them) and lakeFS's MD5 checksums. It must finish without a rerun, with the
# figures of the demo on the embedded store; `make test` runs it (QUIET=1).
set -euo pipefail

name=demo-lakefs build='`make build`'
. "$(dirname "${BASH_SOURCE[0]}")/rlpipe-bin.sh"
faults="${FAULTS:-commit-window=250ms,md5-checksums}"

work="$(mktemp -d "${TMPDIR:-/tmp}/rlpipe-demo-lakefs.XXXXXX")"
server=""
cleanup() {
  if [ -n "$server" ]; then
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

"$bin" --store "$work/store" init-store >/dev/null
# Port 0: the kernel picks a free port; the server prints the endpoint.
"$bin" --store "$work/store" --log-level info -o json store serve --addr 127.0.0.1:0 --faults "$faults" \
  >"$work/serving.json" 2>"$work/server.log" &
server=$!
for _ in $(seq 100); do
  [ -s "$work/serving.json" ] && break
  kill -0 "$server" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
  sleep 0.1
done
endpoint="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["endpoint"])' "$work/serving.json")"
repo="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["repository"])' "$work/serving.json")"
echo "demo-lakefs: lakeFS stand-in at $endpoint, faults $faults"

export LAKECTL_SERVER_ENDPOINT_URL="$endpoint"
unset LAKECTL_CREDENTIALS_ACCESS_KEY_ID LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY
# QUIET=1 (make test) keeps the demo's output in files, shown if it fails.
if [ "${QUIET:-0}" = 1 ]; then
  if ! DEMO_STORE="lakefs://$repo" RLPIPE="$bin" "$root/scripts/demo.sh" >"$work/demo.out" 2>"$work/demo.err"; then
    cat "$work/demo.out" "$work/demo.err" "$work/server.log" >&2
    echo "demo-lakefs: the demo failed through the lakeFS stand-in (output above)" >&2
    exit 1
  fi
  grep -E '^  eval .* on heldout' "$work/demo.out" | tail -1
else
  DEMO_STORE="lakefs://$repo" RLPIPE="$bin" "$root/scripts/demo.sh" 2> >(tee "$work/demo.err" >&2)
fi
kill -TERM "$server"
wait "$server" || true
server=""
misses="$(grep -o '"fault_misses":[0-9]*' "$work/server.log" | cut -d: -f2 || true)"
rereads="$(grep -c 'a staged input is not found' "$work/demo.err" || true)"
echo
echo "demo-lakefs: finished through lakeFS without a rerun; the stand-in answered ${misses:-?} reads with 404, the engine read ${rereads} staged inputs again"
