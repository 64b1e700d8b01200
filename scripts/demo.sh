#!/usr/bin/env bash
# A walkthrough with the real rlpipe binary: import a
# dataset, commit it, branch, change the branch, diff, merge, read history
# and the table back, then run the RL loop, rerun it from the cache, rescore
# it and write its report. The store is kept afterwards, to explore with
# `rlpipe ui`, `rlpipe status arith` and the notebooks: .rlpipe-demo/store in
# the checkout (RLPIPE_DEMO_DIR moves it). Each run starts it afresh; a
# directory there that this script did not make is never removed.
set -euo pipefail

name=demo build='`make build` (or `make demo`, which builds it)'
. "$(dirname "${BASH_SOURCE[0]}")/rlpipe-bin.sh"

work="$(mktemp -d "${TMPDIR:-/tmp}/rlpipe-demo.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# The demo's own store, kept for what comes after it.
demo_dir="${RLPIPE_DEMO_DIR:-$root/.rlpipe-demo}"
marker="$demo_dir/MADE-BY-RLPIPE-DEMO"
if [ -z "${DEMO_STORE:-}" ]; then
  if [ -e "$demo_dir" ] && [ ! -e "$marker" ]; then
    echo "demo: $demo_dir exists and was not made by the demo; move it away or set RLPIPE_DEMO_DIR" >&2
    exit 1
  fi
  rm -rf "$demo_dir"
  mkdir -p "$demo_dir"
  printf 'scripts/demo.sh made this directory and removes it at its next run.\n' >"$marker"
fi

# Every command below works on this store, whatever the caller's setting;
# DEMO_STORE names one that already exists instead (scripts/demo-lakefs.sh
# runs the demo through a lakeFS stand-in that way).
export RLPIPE_STORE="${DEMO_STORE:-$demo_dir/store}"

# quote prints an argument the way a user would type it.
quote() {
  case "$1" in
    *[!A-Za-z0-9_./:=+@%-]* | "") printf "'%s'" "${1//\'/\'\\\'\'}" ;;
    *) printf '%s' "$1" ;;
  esac
}

# step prints a heading; run prints a command line, then runs it.
step() { printf '\n## %s\n' "$*"; }
run() {
  local line="rlpipe" a
  for a in "$@"; do line+=" $(quote "$a")"; done
  printf '\n$ %s\n' "$line"
  "$bin" "$@"
}

# prompts N OFFSET writes N arithmetic prompts as JSONL, the same each run.
prompts() {
  local n="$1" off="$2" i a b
  for ((i = 1; i <= n; i++)); do
    a=$(((i * 7 + off) % 50 + 1))
    b=$(((i * 13 + 2 * off) % 50 + 1))
    printf '{"prompt_id":"p%04d","prompt":"%d+%d=","answer":"%d"}\n' "$i" "$a" "$b" $((a + b))
  done
}

cd "$work"
prompts 20 5 >prompts.jsonl
prompts 24 5 >prompts-v2.jsonl
printf 'reward: exact match on the answer\n' >NOTES.md

step "A fresh store (RLPIPE_STORE=$RLPIPE_STORE)"
if [ -z "${DEMO_STORE:-}" ]; then
  run init-store
fi

step "Import 20 arithmetic prompts (JSONL) as a Parquet table on main"
printf '\n$ head -3 prompts.jsonl\n'
head -3 prompts.jsonl
run import prompts.jsonl main:data/prompts.parquet
run commit main -m "add 20 arithmetic prompts" --meta source=demo

step "Branch, and change the branch: four more prompts and a note"
run branch create more-prompts --from main
run import prompts-v2.jsonl more-prompts:data/prompts.parquet
run put NOTES.md more-prompts:NOTES.md
run diff more-prompts
run commit more-prompts -m "add 4 prompts and a note"

step "What the branch changed since it left main"
run diff main more-prompts

step "Merge it back"
run merge more-prompts main
run log main --oneline
run log main --limit 1

step "What main holds now"
run ls main: --recursive
run stat main:data/prompts.parquet
run cat main:data/prompts.parquet
run cat main:data/prompts.parquet -o json --limit 2
run cat main:NOTES.md

step "History stays readable: main before the merge (main~1)"
run ls main~1: --recursive
run diff main~1 main --two-dot

step "The arithmetic task: 4,096 training problems and 500 held out, never seen by the model"
run dataset arith main

step "GRPO with LoRA on the embedded model: 60 iterations, 16 prompts × 8 samples, one-step overlap"
report="$root/report-arith.html"
run run -f "$root/examples/arithmetic/pipeline.yaml" --log-level warn --report "$report"
run status arith

step "Run it again: every task is a cache hit, nothing is recomputed"
run run -f "$root/examples/arithmetic/pipeline.yaml" --run arith-again --log-level warn --no-report
run diff runs-arith runs-arith-again --two-dot --prefix iterations/

step "Try a new reward on the finished run, on a branch: no rollout is regenerated"
run rescore --from runs-arith --reward "$root/examples/arithmetic/reward-length.yaml" --branch try-reward --top 3
run diff runs-arith try-reward --two-dot --prefix iterations/000001/

step "The report: learning curves, pass@k per checkpoint, training health, alarms, best and worst samples"
run report arith --out "$report" --compare try-reward
printf '\nopen %s in a browser (one self-contained file, no network)\n' "$report"

if [ -z "${DEMO_STORE:-}" ]; then
  rel="${bin#"$root"/}"
  printf '\nThe run stays in %s. Explore it:\n' "$RLPIPE_STORE"
  printf '  export RLPIPE_STORE=%s\n' "$(quote "$RLPIPE_STORE")"
  printf '  %s ui                # runs, live curves, tables: http://127.0.0.1:8080\n' "$rel"
  printf '  %s status arith      # iterations, evaluations, the held-out gain\n' "$rel"
  printf '  jupyter lab notebooks/   # the notebooks read $RLPIPE_STORE (RLPIPE_RUN=runs-arith)\n'
fi
