"""PPO's value loss of verl's own code, for trainers/grpo/valueloss_test.go.

Usage: python peer_value.py BATCH.json

BATCH.json is {"seqs": [{"v": [...], "old": [...], "ret": [...], "mask":
[0/1, ...]}, ...], "cases": [{"name", "clip", "agg"}, ...]}. Prints one
JSON object: for each case, {"loss", "clipfrac", "grad": the gradient with
respect to each sequence's v}, from core_algos.compute_value_loss under
autograd; or "verl_error": why verl does not import.
"""

import json
import os
import sys


def main():
    with open(sys.argv[1]) as f:
        batch = json.load(f)
    try:
        import torch

        here = os.path.dirname(os.path.abspath(__file__))
        sys.path.insert(0, os.path.join(here, "..", "..", "..", "advantages", "testdata"))
        from peer_advantages import import_core_algos

        core_algos, how = import_core_algos()
    except Exception as e:  # report, so that the Go test skips with the reason
        json.dump({"verl_error": f"{type(e).__name__}: {e}"}, sys.stdout)
        return
    seqs = batch["seqs"]
    width = max(len(s["v"]) for s in seqs)

    def padded(key):
        return torch.tensor([s[key] + [0.0] * (width - len(s[key])) for s in seqs], dtype=torch.float64)

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
            "grad": [v.grad[i, : len(s["v"])].tolist() for i, s in enumerate(seqs)],
        }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
