# mean prints the integer mean of its arguments: mean 1 2 3 prints 2.
mean() {
  local sum=0 n=$#
  for x in "$@"; do
    sum=$((sum + x))
  done
  echo $((sum / (n + 1)))
}
