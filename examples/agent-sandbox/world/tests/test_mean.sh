# Run with: bash tests/test_mean.sh
source "$(dirname "$0")/../lib/mean.sh"
status=0
check() {
  local want=$1 got
  shift
  got=$(mean "$@")
  if [ "$got" = "$want" ]; then
    echo "ok   mean $* = $got"
  else
    echo "FAIL mean $* = $got, want $want"
    status=1
  fi
}
check 2 1 2 3
check 10 10
check 4 2 4 6 4
exit $status
