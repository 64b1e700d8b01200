#!/usr/bin/env bash
# The multi-turn demo: GRPO on episodes of examples/chain on the embedded
# model, in a store of its own (.rlpipe-demo-agent in the checkout, made
# afresh each run and kept to explore), then its held-out gain.
set -euo pipefail

name=demo-agent build='`make build` (or `make demo-agent`, which builds it)'
. "$(dirname "${BASH_SOURCE[0]}")/rlpipe-bin.sh"
demo_dir RLPIPE_DEMO_AGENT_DIR

echo "## The store and the problems"
"$bin" init-store
"$bin" dataset arith main
echo
echo "## GRPO on multi-turn episodes: $ rlpipe run -f examples/chain/pipeline.yaml"
start=$(date +%s)
"$bin" run -f "$root/examples/chain/pipeline.yaml" --log-level error
echo "demo-agent: the run took $(($(date +%s) - start)) s"
echo
"$bin" status chain | tail -n 8
echo
echo "The run stays in $dir/store. Explore it:"
echo "  export RLPIPE_STORE=$dir/store"
echo "  bin/rlpipe ui                # each episode turn by turn, its trainable tokens marked"
echo "  bin/rlpipe report chain      # the report, the best and worst episodes turn by turn"
