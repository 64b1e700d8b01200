"""PPO's value loss of verl's own code, for trainers/grpo/peer_test.go.

Usage: python peer_value.py BATCH.json

BATCH.json is {"seqs": [{"v": [...], "old": [...], "ret": [...], "mask":
[0/1, ...]}, ...], "cases": [{"name", "clip", "agg"}, ...]}. Prints one
JSON object: for each case, {"loss", "clipfrac", "grad": the gradient with
respect to each sequence's v}, from core_algos.compute_value_loss under
autograd; or "verl_error": why verl does not import. verl is imported as
advantages/testdata/peer_advantages.py does (without ray).
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "advantages", "testdata"))
from peer_advantages import verl_batch  # noqa: E402


def main():
    got = verl_batch("seqs")
    if got is None:
        return
    batch, _, core_algos, how, padded = got
    out = {"verl_import": how}
    for c in batch["cases"]:
        v = padded("v").requires_grad_(True)
        loss, clipfrac = core_algos.compute_value_loss(
            vpreds=v, returns=padded("ret"), values=padded("old"), response_mask=padded("mask"),
            cliprange_value=c["clip"], loss_agg_mode=c["agg"],
        )
        loss.backward()
        out[c["name"]] = {
            "loss": loss.item(),
            "clipfrac": float(clipfrac),
            "grad": [v.grad[i, : len(s["v"])].tolist() for i, s in enumerate(batch["seqs"])],
        }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
