#!/usr/bin/env bash
# The reasoning-gym demo: reasoning-gym's basic_arithmetic questions (two
# one-digit terms) through `rlpipe dataset reasoning-gym`, GRPO on tiny-rg
# scored by reasoning-gym's own score_answer in the sandboxed Python worker
# (examples/reasoning-gym-demo), in a store of its own (.rlpipe-demo-rg in
# the checkout, made afresh each run and kept to explore), then the
# held-out score before and after. Needs the project venv (.venv-py, with
# reasoning-gym; `make deps`).
set -euo pipefail

name=demo-rg build='`make build` (or `make demo-rg`, which builds it)'
. "$(dirname "${BASH_SOURCE[0]}")/rlpipe-bin.sh"
venv="${RLPIPE_PY_VENV:-$root/.venv-py}"
if [ ! -x "$venv/bin/python" ]; then
  echo "demo-rg: no project venv at $venv: run make deps (scripts/py-venv.sh) for reasoning-gym" >&2
  exit 1
fi
demo_dir RLPIPE_DEMO_RG_DIR

echo "## The store and reasoning-gym's questions: 1,500 to train on, 200 held out"
"$bin" init-store
"$bin" dataset reasoning-gym basic_arithmetic main --size 1700 --heldout 200 --seed 1 \
  --config min_terms=2 --config max_terms=2 --config min_digits=1 --config max_digits=1 --python "$venv"
echo
echo "## GRPO on tiny-rg, scored by reasoning-gym's score_answer: $ rlpipe run -f examples/reasoning-gym-demo/pipeline.yaml"
start=$(date +%s)
"$bin" run -f "$root/examples/reasoning-gym-demo/pipeline.yaml" --log-level error --no-report
took=$(($(date +%s) - start))
echo
"$bin" status rg -o json | "$venv/bin/python" -c '
import json, sys
evals = json.load(sys.stdin)["evals"]
base, last, it = evals[0]["metrics"]["avg@8"], evals[-1]["metrics"]["avg@8"], evals[-1]["iteration"]
print("held-out score (mean of reasoning-gym score_answer, 200 questions x 8 samples):")
print(f"  base {base:.4f}, iteration {it} {last:.4f}: {100 * (last - base):+.1f} points in {sys.argv[1]} s")
' "$took"
echo
echo "The run stays in $dir/store. Explore it:"
echo "  export RLPIPE_STORE=$dir/store"
echo "  bin/rlpipe status rg         # every evaluation: avg@8, pass@k, the exact pass@1"
echo "  bin/rlpipe ui                # the questions, the completions and their scores"
