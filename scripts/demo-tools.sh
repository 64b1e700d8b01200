#!/usr/bin/env bash
# The agentic demo in sandboxes: GRPO on tiny-tool's episodes of a
# tool-using task (examples/tools-demo), each in its own copy-on-write
# bubblewrap world, tool calls in the Hermes format, a verifier in a
# separate sandbox; in a store of its own (.rlpipe-demo-tools in the
# checkout, made afresh each run and kept to explore), then the held-out
# success before and after, and the run's wall time. Needs bubblewrap.
set -euo pipefail

name=demo-tools build='`make build` (or `make demo-tools`, which builds it)'
. "$(dirname "${BASH_SOURCE[0]}")/rlpipe-bin.sh"
demo_dir RLPIPE_DEMO_TOOLS_DIR

echo "## The store and the tasks: 74 problems to train on, 26 held out of the RL run (tiny-tool was pretrained on all 100 sums)"
(cd "$root" && go run ./examples/tools-demo "$dir")
"$bin" init-store
"$bin" dataset import "$dir/train.jsonl" main:data/sum-train.parquet --id id --question instruction --no-answer
"$bin" dataset import "$dir/heldout.jsonl" main:data/sum-heldout.parquet --id id --question instruction --no-answer
echo
echo "## GRPO on episodes in sandboxed worlds: $ rlpipe run -f examples/tools-demo/pipeline.yaml"
start=$(date +%s)
"$bin" run -f "$root/examples/tools-demo/pipeline.yaml" --log-level error --no-report
took=$(($(date +%s) - start))
echo
echo "held-out task success (pass@1: 26 problems x 16 episodes sampled at temperature 1, judged by the verifier), run in $took s:"
"$bin" status tools | tail -n 1
echo
echo "The run stays in $dir/store. Explore it:"
echo "  export RLPIPE_STORE=$dir/store"
echo "  bin/rlpipe status tools    # every evaluation"
echo "  bin/rlpipe ui               # each episode turn by turn: tool calls, tool messages, the verdict"
